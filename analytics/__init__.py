"""PySpark billing and consumer-lag jobs over the brokers' metering records (docs/analytics.md).

Pure DataFrame transformations live in ``billing`` and ``lag``; ``jobs`` wires them to inputs and
outputs; ``__main__`` is the thin entry point ``spark-submit`` runs; ``loader`` (the only module that
touches Django) writes the results into the control-plane database.
"""

"""Django app: the web admin console. Presentation only; business rules live in ``tenants``."""

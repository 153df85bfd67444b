"""gunicorn settings for the control plane: ``gunicorn -c python:config.gunicorn config.asgi:application``.

ASGI under gunicorn's process manager: uvicorn workers serve requests, gunicorn restarts a worker
that dies or hangs. Where it listens and how many workers come from the same environment as the
rest of the control plane (``MQ_HTTP_LISTEN``, ``WEB_CONCURRENCY``).
"""

from __future__ import annotations

from config.env import get_settings

_env = get_settings()

bind = [_env.http_listen]
workers = _env.web_concurrency
worker_class = "uvicorn_worker.UvicornWorker"
# A request slower than this is a stuck worker: gunicorn kills and replaces it.
timeout = 60
graceful_timeout = 20
# Recycle workers now and then so a slow leak cannot grow without bound.
max_requests = 5000
max_requests_jitter = 500
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = "*"

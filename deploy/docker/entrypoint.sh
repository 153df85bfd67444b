#!/bin/sh
# One image, one role per container: the first argument names the role, the rest goes to its command.
#   control-plane  gunicorn + uvicorn workers serving config.asgi (MQ_HTTP_LISTEN, WEB_CONCURRENCY)
#   worker         the Celery worker (provisioning, reconcile, checks: the default queue)
#   analytics-worker  the Celery worker of the nightly Spark jobs (their own queue: a job runs for
#                  minutes and must not hold the slots provisioning waits for)
#   beat           Celery beat (run exactly one)
#   broker         a broker node; /etc/mqcloud/broker.toml is read when present, MQ_BROKER_* always
#   controller     an HA controller (MQ_CONTROLLER_LISTEN, MQ_CONTROLLER_DB)
#   migrate        apply database migrations (a one-off job before control-plane/worker/beat start)
#   manage         any manage.py command      anything else is run as given
set -eu

role="${1:-control-plane}"
[ "$#" -gt 0 ] && shift

case "$role" in
  control-plane)
    exec gunicorn -c python:config.gunicorn config.asgi:application "$@" ;;
  worker)
    exec celery -A config worker -Q celery --loglevel "${MQ_LOG_LEVEL:-INFO}" "$@" ;;
  analytics-worker)
    exec celery -A config worker -Q analytics -n "analytics@%h" --loglevel "${MQ_LOG_LEVEL:-INFO}" "$@" ;;
  beat)
    exec celery -A config beat --loglevel "${MQ_LOG_LEVEL:-INFO}" "$@" ;;
  broker)
    if [ -f /etc/mqcloud/broker.toml ]; then
      exec mqctl broker start --config /etc/mqcloud/broker.toml "$@"
    fi
    exec mqctl broker start "$@" ;;
  controller)
    exec mqctl controller start "$@" ;;
  migrate)
    exec python manage.py migrate --noinput "$@" ;;
  manage)
    exec python manage.py "$@" ;;
  *)
    exec "$role" "$@" ;;
esac

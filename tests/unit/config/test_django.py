"""The Django project is healthy: system checks, migrations, production-safe defaults."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

REPO = Path(__file__).resolve().parents[3]


def test_system_checks_pass() -> None:
    out = StringIO()
    call_command("check", stdout=out)
    assert "no issues" in out.getvalue()


@pytest.mark.django_db
def test_no_missing_migrations() -> None:
    out = StringIO()
    # --check exits non-zero (SystemExit) when a model change has no migration
    call_command("makemigrations", "--check", "--dry-run", stdout=out)


def test_deploy_checks_clean_with_defaults(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MQ_", "DEBUG", "SECRET_KEY"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        MQ_DATA_DIR=str(tmp_path),
        SECRET_KEY="a-production-secret-" + "x7Kq9mZ2pL4vB8nR1tY6wE3uI5oA0sD" * 2,
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_settings_come_from_environment(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="config.settings",
        MQ_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://u:p@db.example:6543/mq",
        CELERY_BROKER_URL="redis://r:6379/2",
        ALLOWED_HOSTS="a.example,b.example",
        DEBUG="1",
    )
    code = (
        "print(s.DATABASES['default']['HOST'], s.DATABASES['default']['PORT'], s.CELERY_BROKER_URL,"
        " ','.join(s.ALLOWED_HOSTS), s.DEBUG, s.SECRET_KEY == open(s.DATA_DIR / 'secret_key').read().strip())"
    )
    assert _printed_by_settings(env, code).split() == [
        "db.example",
        "6543",
        "redis://r:6379/2",
        "a.example,b.example",
        "True",
        "True",
    ]
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_openapi_schema_generates_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(out))
    assert "/api/v1/health" in out.read_text()


def test_celery_beat_starts_on_a_new_data_dir_with_a_broker_url(tmp_path: Path) -> None:
    # The production shape (CELERY_BROKER_URL set, as the cluster topology and deployments have it) on
    # a data dir nothing has written yet: beat must open its schedule file there and keep running
    # (it once stopped at start, its folder missing, and no scheduled job ran).
    env = dict(os.environ, MQ_DATA_DIR=str(tmp_path), CELERY_BROKER_URL="memory://")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and beat.poll() is None:
            if list((tmp_path / "celery").glob("beat-schedule*")):
                break
            time.sleep(0.2)
        time.sleep(1)  # a beat that fails on its schedule file exits right after opening it
        running = beat.poll() is None
    finally:
        beat.terminate()
        output = beat.communicate(timeout=30)[0]
    assert running, output[-3000:]
    assert list((tmp_path / "celery").glob("beat-schedule*")), output[-3000:]
    assert "beat raised exception" not in output


def test_the_nightly_analytics_schedule_follows_its_setting_and_can_be_off(tmp_path: Path) -> None:
    def nightly(setting: str) -> list[str]:
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings", MQ_DATA_DIR=str(tmp_path))
        env["MQ_ANALYTICS_NIGHTLY_AT"] = setting
        code = (
            "[print(k, e['schedule'].hour, e['schedule'].minute)"
            " for k, e in sorted(s.CELERY_BEAT_SCHEDULE.items()) if k.startswith('analytics-')]"
        )
        return _printed_by_settings(env, code).splitlines()

    assert nightly("04:15") == ["analytics-billing-nightly {4} {15}", "analytics-lag-nightly {4} {15}"]
    assert nightly("off") == []  # the test stacks turn it off: no Spark load during the tests


def _printed_by_settings(env: dict[str, str], code: str) -> str:
    """What ``code`` prints in a fresh interpreter whose Django settings (``s``) come from ``env``."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings as s;" + code,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout

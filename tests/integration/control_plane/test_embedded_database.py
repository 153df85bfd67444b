"""The embedded SQLite database under writers in several processes, as ``mqctl standalone`` runs it
(the API server and the Celery worker each hold a connection to the same file).

A deferred transaction that reads and then writes got "database is locked" at once, without waiting,
when another process wrote first; the API answered 500 to a tenant create. Each process here runs the
real service (``create_tenant``: a read of the default plan, the insert, the audit record) in a loop.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

from tests.integration.broker.conftest import REPO_ROOT

WRITERS = 3
CREATES_EACH = 60

WRITER = textwrap.dedent(
    """
    import os, sys, django
    django.setup()
    from django.db import OperationalError
    from tenants.models import Tenant
    from tenants.services.audit import Actor
    from tenants.services.tenants import create_tenant

    failures = []
    for i in range(int(sys.argv[2])):
        try:
            create_tenant(Actor(), namespace=f"w{sys.argv[1]}n{i}", name=f"writer {sys.argv[1]} #{i}")
        except OperationalError as exc:
            failures.append(str(exc))
    print(len(failures), failures[:1])
    """
)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(MQ_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="config.settings")
    return env


def test_concurrent_writers_in_several_processes_all_commit(tmp_path: Path) -> None:
    env = _env(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO_ROOT, env=env, check=True, timeout=180
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(n), str(CREATES_EACH)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    outputs = [w.communicate(timeout=180) for w in writers]
    for writer, (out, err) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, err
        assert out.split()[0] == "0", f"a writer's transactions failed: {out}"
    count = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from tenants.models import Tenant; print(Tenant.objects.count())",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert int(count.stdout.split()[-1]) >= WRITERS * CREATES_EACH  # every create landed (plus any seeded)
    with closing(sqlite3.connect(tmp_path / "mqcloud.sqlite3")) as db:
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"  # readers (the console, the API's lists) do not wait on a writer

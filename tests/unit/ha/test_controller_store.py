"""The controller database: one lease holder at a time; group writes only under the lease.

SQLite always; PostgreSQL too when DATABASE_URL points at one (``make test`` runs against a
throwaway PostgreSQL through scripts/with_postgres.sh).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.ha.controller.store import ControllerStore, GroupRecord, NodeRecord


def _pg_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'controller.db'}"
        return
    pg = _pg_url()
    if pg is None:
        pytest.skip("DATABASE_URL is not a PostgreSQL URL (make test provides one)")
    yield pg
    store = ControllerStore(pg)
    with store._transaction() as conn:
        for table in ("mq_ha_lease", "mq_ha_group", "mq_ha_node"):
            conn.execute(f"DELETE FROM {table}")
    store.close()


def test_one_lease_holder(url: str) -> None:
    a, b = ControllerStore(url), ControllerStore(url)
    try:
        a.release_lease("a")
        b.release_lease("b")
        assert a.acquire_lease("a", 1000.0, 3.0)
        assert not b.acquire_lease("b", 1001.0, 3.0)
        assert a.acquire_lease("a", 1002.0, 3.0)  # renewal
        assert b.lease_holder(1003.0) == "a"
        # a's lease expires (no renewal): b takes over, a cannot come back while b renews
        assert b.acquire_lease("b", 1006.0, 3.0)
        assert not a.acquire_lease("a", 1007.0, 3.0)
        assert a.lease_holder(1007.0) == "b"
    finally:
        a.close()
        b.close()


def test_group_writes_need_the_lease(url: str) -> None:
    a, b = ControllerStore(url), ControllerStore(url)
    group = f"g-{uuid.uuid4().hex[:6]}"
    try:
        a.release_lease("a")
        b.release_lease("b")
        assert a.acquire_lease("a", 1000.0, 3.0)
        assert a.save_group(GroupRecord(group, "n0", 1, ["n0", "n1"], 2), "a", 1001.0)
        a.save_node(NodeRecord(group, "n0", "127.0.0.1:1", "127.0.0.1:2"))
        assert b.acquire_lease("b", 1005.0, 3.0)
        # the old holder's election is refused and changes nothing
        assert not a.save_group(GroupRecord(group, "n1", 2, ["n1"], 3), "a", 1005.5)
        groups, nodes = b.load()
        assert groups[group] == GroupRecord(group, "n0", 1, ["n0", "n1"], 2)
        assert nodes[(group, "n0")].ha_address == "127.0.0.1:2"
        assert b.save_group(GroupRecord(group, "n1", 2, ["n1"], 3), "b", 1006.0)
        assert a.load()[0][group].master == "n1"
    finally:
        a.close()
        b.close()

"""The controller's persistent state: the active-controller lease, broker groups and their nodes.

SQLite (a file, standalone) or PostgreSQL (psycopg 3, production), chosen by the URL:
``sqlite:///path/controller.db`` / a bare path, or ``postgresql://...``. Tables (own names, so they
can share the control plane's database)::

    mq_ha_lease (name PK, holder, expires_at)            one row 'controller': the active controller
    mq_ha_group (group_name PK, master, master_epoch, sync_state_set JSON, sync_state_set_epoch)
    mq_ha_node  (group_name, node, address, ha_address; PK (group_name, node))

Every change of a group is written in one transaction that first re-checks (and, on PostgreSQL,
row-locks) the lease row, so a controller that lost its lease can never overwrite a newer
election. Times are wall-clock seconds of the writer (controllers of one deployment share NTP).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ("ControllerStore", "GroupRecord", "NodeRecord")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS mq_ha_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL,"
    " expires_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mq_ha_group (group_name TEXT PRIMARY KEY, master TEXT NOT NULL,"
    " master_epoch BIGINT NOT NULL, sync_state_set TEXT NOT NULL, sync_state_set_epoch BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mq_ha_node (group_name TEXT NOT NULL, node TEXT NOT NULL,"
    " address TEXT NOT NULL, ha_address TEXT NOT NULL, PRIMARY KEY (group_name, node))",
)
_LEASE = "controller"


@dataclass(slots=True)
class GroupRecord:
    group: str
    master: str = ""
    master_epoch: int = 0
    sync_state_set: list[str] = field(default_factory=list)
    sync_state_set_epoch: int = 0


@dataclass(slots=True, frozen=True)
class NodeRecord:
    group: str
    node: str
    address: str
    ha_address: str


class ControllerStore:
    """Thread-safe access to the controller tables (one connection, serialized)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._pg = url.startswith(("postgresql://", "postgres://"))
        if self._pg:
            import psycopg

            self._conn: Any = psycopg.connect(url, autocommit=True)
        else:
            path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
        with self._lock:
            for statement in _SCHEMA:
                self._conn.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self._pg else text

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            conn = self._conn
            if self._pg:
                with conn.transaction():
                    yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    #
    # Lease
    #

    def acquire_lease(self, holder: str, now: float, ttl: float) -> bool:
        """Take or renew the lease; False while another holder's lease is unexpired."""
        with self._transaction() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO mq_ha_lease (name, holder, expires_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
                    " expires_at = excluded.expires_at"
                    " WHERE mq_ha_lease.holder = excluded.holder OR mq_ha_lease.expires_at < ?"
                ),
                (_LEASE, holder, now + ttl, now),
            )
            row = conn.execute(
                self._sql("SELECT holder FROM mq_ha_lease WHERE name = ?"), (_LEASE,)
            ).fetchone()
        return bool(row and row[0] == holder)

    def release_lease(self, holder: str) -> None:
        with self._transaction() as conn:
            conn.execute(self._sql("DELETE FROM mq_ha_lease WHERE name = ? AND holder = ?"), (_LEASE, holder))

    def lease_holder(self, now: float) -> str:
        """The active controller's id, "" when the lease is free or expired."""
        with self._lock:
            row = self._conn.execute(
                self._sql("SELECT holder, expires_at FROM mq_ha_lease WHERE name = ?"), (_LEASE,)
            ).fetchone()
        return str(row[0]) if row and float(row[1]) > now else ""

    def _holds(self, conn: Any, holder: str, now: float) -> bool:
        lock = " FOR UPDATE" if self._pg else ""
        row = conn.execute(
            self._sql(f"SELECT holder, expires_at FROM mq_ha_lease WHERE name = ?{lock}"), (_LEASE,)
        ).fetchone()
        return bool(row and row[0] == holder and float(row[1]) > now)

    #
    # Groups and nodes
    #

    def load(self) -> tuple[dict[str, GroupRecord], dict[tuple[str, str], NodeRecord]]:
        with self._lock:
            groups = {
                row[0]: GroupRecord(row[0], row[1], int(row[2]), list(json.loads(row[3])), int(row[4]))
                for row in self._conn.execute(
                    "SELECT group_name, master, master_epoch, sync_state_set, sync_state_set_epoch"
                    " FROM mq_ha_group"
                ).fetchall()
            }
            nodes = {
                (row[0], row[1]): NodeRecord(row[0], row[1], row[2], row[3])
                for row in self._conn.execute(
                    "SELECT group_name, node, address, ha_address FROM mq_ha_node"
                ).fetchall()
            }
        return groups, nodes

    def save_group(self, record: GroupRecord, holder: str, now: float) -> bool:
        """Write ``record`` if ``holder`` still holds the lease; False (nothing written) otherwise."""
        with self._transaction() as conn:
            if not self._holds(conn, holder, now):
                return False
            conn.execute(
                self._sql(
                    "INSERT INTO mq_ha_group (group_name, master, master_epoch, sync_state_set,"
                    " sync_state_set_epoch) VALUES (?, ?, ?, ?, ?) ON CONFLICT (group_name) DO UPDATE SET"
                    " master = excluded.master, master_epoch = excluded.master_epoch,"
                    " sync_state_set = excluded.sync_state_set,"
                    " sync_state_set_epoch = excluded.sync_state_set_epoch"
                ),
                (
                    record.group,
                    record.master,
                    record.master_epoch,
                    json.dumps(sorted(record.sync_state_set)),
                    record.sync_state_set_epoch,
                ),
            )
        return True

    def save_node(self, record: NodeRecord) -> None:
        with self._transaction() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO mq_ha_node (group_name, node, address, ha_address) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (group_name, node) DO UPDATE SET address = excluded.address,"
                    " ha_address = excluded.ha_address"
                ),
                (record.group, record.node, record.address, record.ha_address),
            )

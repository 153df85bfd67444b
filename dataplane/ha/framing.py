"""The replication wire format between a master's HAService and a replica's HAClient (TCP).

Every frame::

    offset  size  field
    0       4     LENGTH   uint32, bytes of PAYLOAD
    4       1     TYPE     uint8 (FrameType)
    5       n     PAYLOAD

Payloads by type (integers big-endian):

- CHALLENGE (master -> replica, first frame), AUTH (replica -> master), AUTH_OK (master -> replica):
  the HMAC challenge-response of ``auth.py``; nothing else is sent or applied before it succeeds.
- HELLO (replica -> master), JSON ``{"group", "node", "epochs": [[epoch, start], ...], "max_offset"}``
- WELCOME (master -> replica), JSON ``{"epoch", "epochs": [...], "start": offset}``: the replica
  truncates its CommitLog to ``start`` (the consistent point), adopts ``epochs`` and is streamed
  from ``start``.
- REFUSE (master -> replica), UTF-8 reason; the connection closes (not the master, wrong group).
- DATA (master -> replica): OFFSET q (where the bytes go), MASTER MAX q, then whole CommitLog
  records (possibly none: a keep-alive carrying the master's max offset).
- REPORT (replica -> master): OFFSET q, the replica's CommitLog max offset after appending.
- META (master -> replica), JSON ``{"metadata": {...}, "offsets": [[group, topic, {qid: off}], ...]}``.
- READ (reader -> any node; the first frame after authentication instead of HELLO, then again for
  every request on the same connection): N x (OFFSET q, SIZE i), the CommitLog records a master wants
  from a replica for a consumer far behind (docs/ha.md, "Reads from replicas").
- RECORDS (node -> reader): those records' bytes, in request order; empty when the node does not hold
  every one of them whole (the reader then reads its own disk).

A frame above ``MAX_FRAME`` (``MAX_AUTH_FRAME`` before authentication) is a protocol error (the
connection closes); nothing is applied.
"""

from __future__ import annotations

import asyncio
import enum
import json
import struct
from typing import Any

__all__ = (
    "DATA_HEADER",
    "FRAME_HEADER",
    "MAX_AUTH_FRAME",
    "MAX_FRAME",
    "MAX_READ_ENTRIES",
    "READ_ENTRY",
    "REPORT",
    "FrameError",
    "FrameType",
    "read_frame",
    "write_frame",
    "write_json",
)

FRAME_HEADER = struct.Struct(
    ">I"  # LENGTH
    "B"  # TYPE
)
DATA_HEADER = struct.Struct(
    ">q"  # OFFSET
    "q"  # MASTER MAX
)
REPORT = struct.Struct(">q")  # OFFSET
READ_ENTRY = struct.Struct(
    ">q"  # OFFSET
    "i"  # SIZE
)
MAX_READ_ENTRIES = 1024
MAX_FRAME = 64 << 20
MAX_AUTH_FRAME = 256  # an unauthenticated peer cannot make the master buffer more than this


class FrameType(enum.IntEnum):
    HELLO = 1
    WELCOME = 2
    REFUSE = 3
    DATA = 4
    REPORT = 5
    META = 6
    CHALLENGE = 7
    AUTH = 8
    AUTH_OK = 9
    READ = 10
    RECORDS = 11


class FrameError(Exception):
    """A malformed frame or an unexpected type: the peer speaks something else."""


async def read_frame(reader: asyncio.StreamReader, max_length: int = MAX_FRAME) -> tuple[FrameType, bytes]:
    header = await reader.readexactly(FRAME_HEADER.size)
    length, kind = FRAME_HEADER.unpack(header)
    if length > max_length:
        raise FrameError(f"frame of {length} bytes; the limit is {max_length}")
    try:
        frame_type = FrameType(kind)
    except ValueError:
        raise FrameError(f"unknown frame type {kind}") from None
    return frame_type, await reader.readexactly(length)


def write_frame(writer: asyncio.StreamWriter, kind: FrameType, payload: bytes) -> None:
    writer.write(FRAME_HEADER.pack(len(payload), kind) + payload)


def write_json(writer: asyncio.StreamWriter, kind: FrameType, value: Any) -> None:
    write_frame(writer, kind, json.dumps(value, separators=(",", ":")).encode())

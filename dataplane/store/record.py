"""CommitLog record format: encoding a batch, decoding and validating one record.

Byte layout of one record (big-endian, see ``docs/store-format.md``)::

    offset size field
    0      4    TOTALSIZE            int32, whole record including this field
    4      4    MAGICCODE            uint32, MESSAGE_MAGIC (0xDAA320A7) or BLANK_MAGIC (0xCBD43194)
    8      4    BODYCRC              uint32, CRC-32 of BODY (the zlib / java.util.zip polynomial)
    12     4    QUEUEID              int32
    16     4    FLAG                 int32
    20     8    QUEUEOFFSET          int64, entry number in the ConsumeQueue
    28     8    PHYSICALOFFSET       int64, offset of this record in the CommitLog
    36     4    SYSFLAG              int32
    40     8    BORNTIMESTAMP        int64, ms
    48     8    BORNHOST             4 bytes IPv4 + int32 port
    56     8    STORETIMESTAMP       int64, ms
    64     8    STOREHOST            4 bytes IPv4 + int32 port
    72     4    RECONSUMETIMES       int32
    76     8    PREPAREDTXOFFSET     int64
    84     4    BODYLENGTH           int32
    88     n    BODY
    ..     2    TOPICLENGTH          uint16
    ..     t    TOPIC                UTF-8
    ..     2    PROPERTIESLENGTH     uint16
    ..     p    PROPERTIES           UTF-8 "k\\x01v\\x02k\\x01v\\x02..."

The CRC covers BODY only (as RocketMQ). A torn tail after a process kill cannot pass recovery because
the writer stores TOTALSIZE of a batch's first record last (``CommitLog``), and every decoder checks the
lengths add up to TOTALSIZE and the topic and properties decode. An end-of-segment marker is
TOTALSIZE (the rest of the segment) + BLANK_MAGIC; the bytes after it stay zero.
"""

from __future__ import annotations

import logging
import mmap
import socket
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from zlib_ng import zlib_ng

from dataplane.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, validate_topic
from dataplane.store.errors import BodyCrcError, CorruptRecordError, InvalidTopicError, StoreError
from dataplane.store.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    AppendEntry,
    MessageToStore,
    StoredMessage,
)

__all__ = (
    "BLANK_MAGIC",
    "ENCODER",
    "END_FILE_MIN_BLANK_LENGTH",
    "HEADER",
    "HEADER_SIZE",
    "MESSAGE_MAGIC",
    "MIN_RECORD_SIZE",
    "BatchEncoding",
    "Buffer",
    "DispatchRequest",
    "QueueRuns",
    "check_record",
    "compiled_advance_queue_offsets",
    "compiled_encode_batch",
    "compiled_write_queue_runs",
    "decode_message_id",
    "decode_properties",
    "decode_record",
    "encode_batch",
    "encode_properties",
    "host_to_bytes",
    "make_message_id_prefix",
    "python_check_record",
    "python_encode_batch",
    "tag_hash",
)

MESSAGE_MAGIC: Final = 0xDAA320A7
BLANK_MAGIC: Final = 0xCBD43194

HEADER: Final = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "I"  # MAGICCODE
    "I"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
    "4s"  # BORNHOST ip
    "i"  # BORNHOST port
    "q"  # STORETIMESTAMP
    "4s"  # STOREHOST ip
    "i"  # STOREHOST port
    "i"  # RECONSUMETIMES
    "q"  # PREPAREDTXOFFSET
    "i"  # BODYLENGTH
)
HEADER_SIZE: Final = HEADER.size
_PREFIX: Final = struct.Struct(">iI")  # TOTALSIZE + MAGICCODE, also the whole end-of-segment marker
_U16: Final = struct.Struct(">H")
END_FILE_MIN_BLANK_LENGTH: Final = _PREFIX.size
# body, topic and properties may be empty; the topic may not (checked when decoding).
MIN_RECORD_SIZE: Final = HEADER_SIZE + 2 + 1 + 2

Buffer = bytes | bytearray | memoryview | mmap.mmap

logger = logging.getLogger(__name__)

_NAME_VALUE_SEP: Final = "\x01"
_PROPERTY_SEP: Final = "\x02"

_host_bytes_cache: dict[tuple[str, int], tuple[bytes, int]] = {}
_host_str_cache: dict[bytes, str] = {}
_topic_tail_cache: dict[str, bytes] = {}
_topic_decode_cache: dict[bytes, str] = {}


def host_to_bytes(host: tuple[str, int]) -> tuple[bytes, int]:
    """IPv4 ``(ip, port)`` to ``(4 raw bytes, port)``; raises StoreError for anything else."""
    cached = _host_bytes_cache.get(host)
    if cached is None:
        try:
            cached = (socket.inet_aton(host[0]), int(host[1]))
        except (OSError, TypeError, IndexError) as exc:
            raise StoreError(f"host must be an IPv4 (ip, port) pair, found {host!r}") from exc
        if len(_host_bytes_cache) < 65536:
            _host_bytes_cache[host] = cached
    return cached


def _host_str(raw: bytes) -> str:
    text = _host_str_cache.get(raw)
    if text is None:
        text = socket.inet_ntoa(raw)
        if len(_host_str_cache) < 65536:
            _host_str_cache[raw] = text
    return text


_host_tuple_cache: dict[tuple[bytes, int], tuple[str, int]] = {}
_new_tuple = tuple.__new__
# The same CRC-32 as zlib.crc32, from zlib-ng's folded (PCLMUL/NEON) implementation: about five
# times faster on a 1 KiB body, which is a quarter of what an append or a checked read costs.
_body_crc32 = zlib_ng.crc32


def _host_tuple(raw: tuple[bytes, int]) -> tuple[str, int]:
    host = (_host_str(raw[0]), raw[1])
    if len(_host_tuple_cache) < 65536:
        _host_tuple_cache[raw] = host
    return host


def _topic_tail(topic: str) -> bytes:
    """TOPICLENGTH + TOPIC + an empty PROPERTIESLENGTH; the topic is validated on first use."""
    encoded = _topic_tail_cache.get(topic)
    if encoded is None:
        validate_topic(topic)
        raw = topic.encode()
        if not raw or len(raw) > 65535:
            raise StoreError(f"topic must be 1..65535 UTF-8 bytes, found {len(raw)}")
        encoded = _U16.pack(len(raw)) + raw + b"\0\0"
        if len(_topic_tail_cache) < 100_000:
            _topic_tail_cache[topic] = encoded
    return encoded


def _decode_topic(raw: bytes) -> str:
    topic = _topic_decode_cache.get(raw)
    if topic is None:
        try:
            topic = raw.decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"topic: expected UTF-8, found {raw[:40]!r}") from exc
        if len(_topic_decode_cache) < 100_000:
            _topic_decode_cache[raw] = topic
    return topic


def tag_hash(tag: str | None) -> int:
    """Stable 32-bit hash of a tag for the ConsumeQueue (0 when there is no tag)."""
    return zlib.crc32(tag.encode()) if tag else 0


def encode_properties(properties: dict[str, str]) -> bytes:
    """``k\\x01v\\x02`` pairs; names and values may not contain the two separator characters."""
    if not properties:
        return b""
    parts = []
    for name, value in properties.items():
        if not name or "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
            raise StoreError(f"property {name!r} contains a separator character or is empty")
        parts.append(f"{name}\x01{value}\x02")
    return "".join(parts).encode()


def decode_properties(raw: bytes) -> dict[str, str]:
    """Inverse of :func:`encode_properties`; raises CorruptRecordError on malformed input."""
    if not raw:
        return {}
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"properties: expected UTF-8, found {raw[:40]!r}") from exc
    if text[-1] != _PROPERTY_SEP:
        raise CorruptRecordError(f"properties: expected to end with \\x02, found {text[-10:]!r}")
    result = {}
    for pair in text[:-1].split(_PROPERTY_SEP):
        name, sep, value = pair.partition(_NAME_VALUE_SEP)
        if not sep or not name:
            raise CorruptRecordError(f"properties: expected name\\x01value, found {pair[:40]!r}")
        result[name] = value
    return result


def make_message_id_prefix(store_host: tuple[str, int]) -> str:
    ip, port = host_to_bytes(store_host)
    return (ip + port.to_bytes(4, "big")).hex().upper()


def decode_message_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Offset message id (32 hex digits: ip 4, port 4, physical offset 8) to (store host, offset)."""
    if len(msg_id) != 32:
        raise StoreError(f"message id: expected 32 hex digits, found {len(msg_id)} characters")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise StoreError(f"message id: expected hex digits, found {msg_id!r}") from exc
    return (socket.inet_ntoa(raw[:4]), int.from_bytes(raw[4:8], "big")), int.from_bytes(raw[8:], "big")


# Per queue touched by a batch: (queue offset of its first message, its packed ConsumeQueue entries).
QueueRuns = dict[tuple[str, int], tuple[int, bytearray]]
# Per queue a batch moved: its new max offset.
Moved = dict[tuple[str, int], int]


class BatchEncoding(NamedTuple):
    """Records encoded for one contiguous write; ``consumed`` messages taken from the batch."""

    # the records (and an end-of-segment marker when ``segment_full``) for one vectored write: three
    # pieces per record from the Python encoder (bodies are not copied), one from the compiled one
    pieces: list[bytes | bytearray | memoryview]
    size: int
    consumed: int
    entries: list[AppendEntry]
    queue_runs: QueueRuns
    # (topic, KEYS, UNIQ_KEY, physical offset) of every record to index
    index_requests: list[tuple[str, str | None, str | None, int]]
    segment_full: bool

    @property
    def data(self) -> bytes:
        return b"".join(self.pieces)


def python_encode_batch(
    msgs: Sequence[MessageToStore],
    start: int,
    physical_offset: int,
    space: int,
    store_timestamp: int,
    store_host: tuple[bytes, int],
    queue_offsets: dict[tuple[str, int], int],
    max_message_size: int,
    msg_id_prefix: str = "",
) -> BatchEncoding:
    """Encode ``msgs[start:]`` from ``physical_offset`` into at most ``space`` bytes.

    Stops before the first record that does not fit with room for an end-of-segment marker and then
    appends that marker (``segment_full``). ``queue_offsets`` (next offset per queue) is only read:
    the caller advances it from ``queue_runs`` once the write succeeded. Builds, in the same pass,
    each message's :class:`AppendEntry` and its ConsumeQueue entry. Raises StoreError for an invalid
    topic or queue id or an oversized message, before anything is written.

    This is the reference implementation; :func:`encode_batch` is the compiled one when it is built
    (``_record_codec.c``), which writes the same bytes into one buffer.
    """
    pieces: list[bytes | bytearray | memoryview] = []
    append = pieces.append
    entries: list[AppendEntry] = []
    add_entry = entries.append
    runs: QueueRuns = {}
    index_requests: list[tuple[str, str | None, str | None, int]] = []
    pack = HEADER.pack
    cq_pack = CQ_ENTRY.pack
    crc32 = zlib.crc32
    body_crc32 = _body_crc32
    new = _new_tuple
    store_ip, store_port = store_host
    tails = _topic_tail_cache
    host_cache = _host_bytes_cache
    pos = physical_offset
    limit = physical_offset + space - END_FILE_MIN_BLANK_LENGTH
    ts = store_timestamp
    header_size = HEADER_SIZE
    for index in range(start, len(msgs)):
        msg = msgs[index]
        topic = msg.topic
        # topic + an empty PROPERTIESLENGTH, validated once per topic
        tail = tails.get(topic) or _topic_tail(topic)
        props = msg.properties
        thash = 0
        keys = uniq = None
        if props:
            praw = encode_properties(props)
            if len(praw) > 65535:
                raise StoreError(f"message {index}: properties of {len(praw)} bytes exceed 65535")
            tail = tail[:-2] + _U16.pack(len(praw)) + praw
            tag = props.get(PROPERTY_TAGS)
            if tag:
                thash = crc32(tag.encode())
            keys = props.get(PROPERTY_KEYS)
            uniq = props.get(PROPERTY_UNIQ_KEY)
        body = msg.body
        blen = len(body)
        size = header_size + blen + len(tail)
        if size > max_message_size:
            raise StoreError(f"message {index}: size {size} exceeds the limit {max_message_size}")
        if pos + size > limit:
            # config caps max_message_size so that every record fits in an empty segment
            append(_PREFIX.pack(physical_offset + space - pos, BLANK_MAGIC))
            return BatchEncoding(
                pieces, pos - physical_offset + END_FILE_MIN_BLANK_LENGTH, index - start, entries,
                runs, index_requests, True,
            )  # fmt: skip
        qid = msg.queue_id
        key = (topic, qid)
        run = runs.get(key)
        if run is None:
            if qid < 0:
                raise InvalidTopicError(f"queue id: expected >= 0, found {qid}")
            run = runs[key] = (queue_offsets.get(key, 0), bytearray())
        queue_entries = run[1]
        qoff = run[0] + len(queue_entries) // CQ_ENTRY_SIZE
        queue_entries += cq_pack(pos, size, thash)
        if keys or uniq:
            # only once the record is known to fit: a record rolled to the next segment is indexed there
            index_requests.append((topic, keys, uniq, pos))
        born_ip, born_port = host_cache.get(msg.born_host) or host_to_bytes(msg.born_host)
        append(
            pack(
                size,
                MESSAGE_MAGIC,
                body_crc32(body),
                qid,
                msg.flag,
                qoff,
                pos,
                msg.sys_flag,
                msg.born_timestamp,
                born_ip,
                born_port,
                ts,
                store_ip,
                store_port,
                msg.reconsume_times,
                msg.prepared_transaction_offset,
                blen,
            )
        )
        append(body)
        append(tail)
        add_entry(new(AppendEntry, (pos, qoff, ts, size, msg_id_prefix)))
        pos += size
    consumed = len(msgs) - start
    return BatchEncoding(pieces, pos - physical_offset, consumed, entries, runs, index_requests, False)


def _load_codec() -> Any | None:
    """The configured C extension (``_record_codec.c``), or None when it is not built."""
    try:
        from dataplane.store import _record_codec  # type: ignore[attr-defined]
    except ImportError:
        logger.warning("the compiled record encoder is not built (scripts/build_ext.py): using Python's")
        return None
    _record_codec.configure(
        message_type=MessageToStore,
        entry_type=AppendEntry,
        encoding_type=BatchEncoding,
        store_error=StoreError,
        invalid_topic_error=InvalidTopicError,
        topic_tails=_topic_tail_cache,
        topic_tail_fn=_topic_tail,
        host_cache=_host_bytes_cache,
        host_fn=host_to_bytes,
        crc32_fn=_body_crc32,
        # the encoder calls zlib-ng's exported zng_crc32 straight from this shared object when it can
        crc32_library=getattr(zlib_ng, "__file__", None),
    )
    return _record_codec


_codec = _load_codec()
compiled_encode_batch: Callable[..., BatchEncoding] | None = None if _codec is None else _codec.encode_batch
# The compiled forms of the two per-queue loops after a write (CommitLog._write and
# CommitLogDispatcher.dispatch_batch hold the Python forms); None when the extension is not built.
compiled_write_queue_runs: (
    Callable[[QueueRuns, dict[tuple[str, int], Any], Callable[..., int]], Moved] | None
) = None if _codec is None else _codec.write_queue_runs
compiled_advance_queue_offsets: Callable[[QueueRuns, dict[tuple[str, int], int]], None] | None = (
    None if _codec is None else _codec.advance_queue_offsets
)
# IndexService.put_batch's keys of a batch, compiled (index_service.index_items_python is the
# reference); None when not built.
compiled_index_items: (
    Callable[[Sequence[tuple[str, str | None, str | None, int]]], list[tuple[str, int]]] | None
) = None if _codec is None else _codec.index_items
# IndexFile.put_keys' loop, compiled (index_file.py keeps the Python form); None when not built.
# It answers (next number, slots in use, last physical offset, the exception that stopped it or None).
compiled_index_put_keys: Callable[..., tuple[int, int, int, BaseException | None]] | None = (
    None if _codec is None else _codec.index_put_keys
)
# The largest slot of an IndexFile's hash slots (IndexFile._open_slots), compiled; None when not built.
compiled_index_newest_slot: Callable[[bytes | bytearray], int] | None = (
    None if _codec is None else _codec.index_newest_slot
)
# record.decode_record's compiled form (None when not built): well-formed records only
compiled_decode_record: Callable[..., StoredMessage | None] | None = (
    None if _codec is None else _codec.decode_record
)
# StoreReader.get_messages' usual run (no tag filter, the local CommitLog), compiled; None when not
# built. It stops short at anything unusual, which the Python loop then handles.
compiled_read_run: Callable[..., tuple[int, int]] | None = None if _codec is None else _codec.read_run
# "compiled" or "python": which encoder appends (tests/unit/store/test_record.py checks it)
ENCODER: Final = "python" if compiled_encode_batch is None else "compiled"
encode_batch: Callable[..., BatchEncoding] = compiled_encode_batch or python_encode_batch


def _lengths(buf: Buffer, pos: int, total: int, body_len: int) -> tuple[int, int, int]:
    """Validate the variable part; returns (topic_start, topic_len, props_len)."""
    body_end = pos + HEADER_SIZE + body_len
    end = pos + total
    if body_len < 0 or body_end + 2 > end:
        raise CorruptRecordError(
            f"record at {pos}: body length {body_len} runs past the record end (total size {total})"
        )
    (topic_len,) = _U16.unpack_from(buf, body_end)
    topic_start = body_end + 2
    if topic_len == 0 or topic_start + topic_len + 2 > end:
        raise CorruptRecordError(f"record at {pos}: topic length {topic_len} invalid for total size {total}")
    (props_len,) = _U16.unpack_from(buf, topic_start + topic_len)
    if topic_start + topic_len + 2 + props_len != end:
        raise CorruptRecordError(
            f"record at {pos}: expected lengths to add up to total size {total}, found "
            f"{topic_start + topic_len + 2 + props_len - pos}"
        )
    return topic_start, topic_len, props_len


def _check_prefix(buf: Buffer, pos: int, limit: int) -> tuple[int, int]:
    if pos < 0 or pos + END_FILE_MIN_BLANK_LENGTH > limit:
        raise CorruptRecordError(f"record at {pos}: expected 8 bytes of prefix, only {limit - pos} remain")
    total, magic = _PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if total < END_FILE_MIN_BLANK_LENGTH or pos + total > limit:
            raise CorruptRecordError(f"end-of-segment marker at {pos}: size {total} runs past {limit}")
        return total, magic
    if magic != MESSAGE_MAGIC:
        raise CorruptRecordError(
            f"record at {pos}: expected magic 0x{MESSAGE_MAGIC:08X}, found 0x{magic:08X}"
        )
    if total < MIN_RECORD_SIZE or pos + total > limit:
        raise CorruptRecordError(
            f"record at {pos}: total size {total} outside [{MIN_RECORD_SIZE}, {limit - pos}] (bytes left)"
        )
    return total, magic


def decode_record(
    buf: Buffer, pos: int, limit: int, msg_id_prefix: str, check_crc: bool = True
) -> StoredMessage:
    """Decode the record at ``buf[pos:]`` (not beyond ``limit``) or raise CorruptRecordError.

    Well-formed records are decoded by the C extension; anything else by :func:`python_decode_record`
    (the reference), which raises the error that says what is wrong."""
    if compiled_decode_record is not None:
        msg: StoredMessage | None = compiled_decode_record(buf, pos, limit, check_crc, StoredMessage)
        if msg is not None:
            return msg
    return python_decode_record(buf, pos, limit, msg_id_prefix, check_crc)


def python_decode_record(
    buf: Buffer, pos: int, limit: int, msg_id_prefix: str, check_crc: bool = True
) -> StoredMessage:
    """:func:`decode_record` in Python: the reference of the compiled decoder, and its error messages."""
    if pos < 0 or pos + HEADER_SIZE > limit:
        _check_prefix(buf, pos, limit)
        raise CorruptRecordError(f"record at {pos}: expected {HEADER_SIZE} header bytes before {limit}")
    h = HEADER.unpack_from(buf, pos)
    total = h[0]
    if h[1] != MESSAGE_MAGIC or total < MIN_RECORD_SIZE or pos + total > limit:
        _check_prefix(buf, pos, limit)
        raise CorruptRecordError(f"record at {pos}: expected a message, found an end-of-segment marker")
    body_start = pos + HEADER_SIZE
    body_end = body_start + h[16]
    end = pos + total
    if h[16] < 0 or body_end + 2 > end:
        _lengths(buf, pos, total, h[16])
    tail = buf[body_end:end]
    topic_len = (tail[0] << 8) | tail[1]
    props_at = 2 + topic_len
    if (
        topic_len == 0
        or props_at + 2 > len(tail)
        or props_at + 2 + (tail[props_at] << 8 | tail[props_at + 1]) != len(tail)
    ):
        _lengths(buf, pos, total, h[16])
    body = buf[body_start:body_end]
    if type(body) is not bytes:
        body = bytes(body)
    if check_crc and _body_crc32(body) != h[2]:
        raise CorruptRecordError(
            f"record at {pos}: expected body CRC 0x{h[2]:08X}, found 0x{_body_crc32(body):08X}"
        )
    topic_raw = bytes(tail[2:props_at])
    topic = _topic_decode_cache.get(topic_raw) or _decode_topic(topic_raw)
    props = decode_properties(bytes(tail[props_at + 2 :])) if len(tail) > props_at + 2 else {}
    born = _host_tuple_cache.get(h[9:11]) or _host_tuple(h[9:11])
    store = _host_tuple_cache.get(h[12:14]) or _host_tuple(h[12:14])
    return _new_tuple(
        StoredMessage,
        (
            topic,
            h[3],
            h[5],
            h[6],
            body,
            props,
            h[11],
            h[8],
            born,
            store,
            h[14],
            h[7],
            h[4],
            h[15],
            total,
            h[2],
        ),
    )


class DispatchRequest(NamedTuple):
    """What the dispatcher needs from one valid record (RocketMQ ``DispatchRequest``)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    tag_hash: int
    store_timestamp: int
    keys: str | None
    uniq_key: str | None


def check_record(buf: Buffer, pos: int, limit: int) -> DispatchRequest | int:
    """Validate the record at ``pos`` with its CRC for recovery and replication.

    Returns a DispatchRequest, or the size of an end-of-segment marker (an int); raises
    CorruptRecordError for anything else (including zeroes: TOTALSIZE 0 means never written).
    A well-formed record is read by the compiled decoder when it is built (recovery and every
    replicated record pass here; docs/benchmarks.md, "A replica's apply and recovery read records
    with the compiled decoder"); anything else goes to :func:`python_check_record`, which says what
    is wrong.
    """
    if compiled_decode_record is not None:
        stored = compiled_decode_record(buf, pos, limit, True, StoredMessage)
        if stored is not None:
            props = stored.properties
            tag = props.get(PROPERTY_TAGS)
            return DispatchRequest(
                stored.topic,
                stored.queue_id,
                stored.queue_offset,
                stored.physical_offset,
                stored.size,
                tag_hash(tag),
                stored.store_timestamp,
                props.get(PROPERTY_KEYS),
                props.get(PROPERTY_UNIQ_KEY),
            )
    return python_check_record(buf, pos, limit)


def python_check_record(buf: Buffer, pos: int, limit: int) -> DispatchRequest | int:
    """:func:`check_record` in Python: the reference of its compiled path, and its error messages."""
    total, magic = _check_prefix(buf, pos, limit)
    if magic == BLANK_MAGIC:
        return total
    h = HEADER.unpack_from(buf, pos)
    topic_start, topic_len, props_len = _lengths(buf, pos, total, h[16])
    body_start = pos + HEADER_SIZE
    crc = _body_crc32(buf[body_start : body_start + h[16]])
    topic = _decode_topic(bytes(buf[topic_start : topic_start + topic_len]))
    props_start = topic_start + topic_len + 2
    props = decode_properties(bytes(buf[props_start : props_start + props_len])) if props_len else {}
    tag = props.get(PROPERTY_TAGS)
    request = DispatchRequest(
        topic,
        h[3],
        h[5],
        h[6],
        total,
        zlib.crc32(tag.encode()) if tag else 0,
        h[11],
        props.get(PROPERTY_KEYS),
        props.get(PROPERTY_UNIQ_KEY),
    )
    if crc != h[2]:
        raise BodyCrcError(f"record at {pos}: expected body CRC 0x{h[2]:08X}, found 0x{crc:08X}", request)
    return request

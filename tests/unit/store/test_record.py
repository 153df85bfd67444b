"""The CommitLog record format: golden layout, round trips, and corrupt input."""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.store.checkpoint import StoreCheckpoint
from dataplane.store.consume_queue import CQ_ENTRY
from dataplane.store.errors import CorruptRecordError, StoreError
from dataplane.store.message import MessageToStore, StoredMessage
from dataplane.store.record import (
    BLANK_MAGIC,
    ENCODER,
    HEADER_SIZE,
    MESSAGE_MAGIC,
    BatchEncoding,
    check_record,
    compiled_decode_record,
    compiled_encode_batch,
    decode_message_id,
    decode_properties,
    decode_record,
    encode_batch,
    encode_properties,
    make_message_id_prefix,
    python_check_record,
    python_decode_record,
    python_encode_batch,
    tag_hash,
)

STORE_HOST = (b"\x7f\x00\x00\x01", 10911)

Encoder = Callable[..., BatchEncoding]


@pytest.fixture(params=["python", "compiled"])
def encoder(request: pytest.FixtureRequest) -> Encoder:
    """Both encoders must write the same records; the compiled one is built by ``make venv``."""
    if request.param == "python":
        return python_encode_batch
    assert compiled_encode_batch is not None, "the C encoder is not built: run scripts/build_ext.py"
    return compiled_encode_batch


def encode(msgs: list[MessageToStore], space: int = 1 << 20, base: int = 0) -> bytes:
    return encode_batch(msgs, 0, base, space, 1_700_000_000_000, STORE_HOST, {}, 1 << 20).data


def test_the_store_appends_with_the_compiled_encoder() -> None:
    assert ENCODER == "compiled"
    assert encode_batch is compiled_encode_batch
    # and it folds body CRCs with zlib-ng's C function, not a Python call per message
    from dataplane.store import _record_codec  # type: ignore[attr-defined]

    assert _record_codec.crc32_source() == "native"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_body_crc_whatever_buffer_holds_the_body(encoder: Encoder, kind: type) -> None:
    # given bodies of every buffer type (only bytes take the compiled encoder's native CRC call)
    body = bytes(range(256)) * 5
    m = MessageToStore("t", 0, kind(body), {})
    # when
    data = encoder([m], 0, 0, 1 << 20, 1, STORE_HOST, {}, 1 << 20).data
    # then
    assert struct.unpack_from(">I", data, 8)[0] == zlib.crc32(body)


def test_golden_layout(encoder: Encoder) -> None:
    # given
    m = MessageToStore("ns%t", 3, b"abc", {"TAGS": "x"}, flag=7, born_timestamp=5, born_host=("10.0.0.1", 99))
    # when
    data = encoder([m], 0, 4096, 1 << 20, 1_700_000_000_000, STORE_HOST, {}, 1 << 20).data
    # then
    assert HEADER_SIZE == 88
    total, magic, crc, qid, flag, qoff, phys = struct.unpack_from(">iIIiiqq", data)
    expected = (len(data), MESSAGE_MAGIC, zlib.crc32(b"abc"), 3, 7, 0, 4096)
    assert (total, magic, crc, qid, flag, qoff, phys) == expected
    assert data[48:56] == b"\x0a\x00\x00\x01" + (99).to_bytes(4, "big")
    assert data[88:91] == b"abc"
    assert data[91:97] == b"\x00\x04ns%t"
    assert data[97:] == b"\x00\x07TAGS\x01x\x02"


def test_round_trip_and_queue_offsets(encoder: Encoder) -> None:
    msgs = [
        MessageToStore("a", i % 2, bytes([i]) * i, {"KEYS": f"k{i} z", "TAGS": f"t{i % 3}"})
        for i in range(10)
    ]
    offsets = {("a", 1): 7}
    prefix = make_message_id_prefix(("127.0.0.1", 10911))
    enc = encoder(msgs, 0, 0, 1 << 20, 42, STORE_HOST, offsets, 1 << 20, prefix)
    assert offsets == {("a", 1): 7}, "only read: the CommitLog advances it after the write"
    assert enc.size == len(enc.data) and enc.consumed == 10 and not enc.segment_full
    assert [e.queue_offset for e in enc.entries] == [0, 7, 1, 8, 2, 9, 3, 10, 4, 11]
    for e, m in zip(enc.entries, msgs, strict=True):
        got = decode_record(enc.data, e.physical_offset, len(enc.data), "X")
        assert (got.body, got.queue_offset, got.size, got.physical_offset) == (
            m.body, e.queue_offset, e.size, e.physical_offset,
        )  # fmt: skip
        assert got.keys == m.properties["KEYS"].split()
        assert got.store_host == ("127.0.0.1", 10911)
        assert got.msg_id == e.msg_id == prefix + f"{e.physical_offset:016X}"
        assert e.store_timestamp == got.store_timestamp == 42
    # the ConsumeQueue entries of each queue, in queue-offset order, and what to index
    for qid, first in ((0, 0), (1, 7)):
        run_first, packed = enc.queue_runs[("a", qid)]
        assert run_first == first
        mine = [(e, m) for e, m in zip(enc.entries, msgs, strict=True) if m.queue_id == qid]
        assert list(CQ_ENTRY.iter_unpack(packed)) == [
            (e.physical_offset, e.size, tag_hash(m.properties["TAGS"])) for e, m in mine
        ]
    assert enc.index_requests == [
        ("a", m.properties["KEYS"], None, e.physical_offset) for e, m in zip(enc.entries, msgs, strict=True)
    ]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(MessageToStore("a/b", 0, b"x"), id="topic-slash"),
        pytest.param(MessageToStore("..", 0, b"x"), id="topic-dotdot"),
        pytest.param(MessageToStore("a", -1, b"x"), id="queue-id"),
        pytest.param(MessageToStore("a", 0, b"x" * 2000), id="too-big"),
        pytest.param(MessageToStore("a", 0, b"x", {"k": "v" * 70_000}), id="properties"),
    ],
)
def test_illegal_message_raises_before_anything_is_encoded(bad: MessageToStore, encoder: Encoder) -> None:
    with pytest.raises(StoreError):
        encoder([MessageToStore("a", 0, b"ok"), bad], 0, 0, 1 << 20, 1, STORE_HOST, {}, 1024)


def test_end_of_segment_marker(encoder: Encoder) -> None:
    msgs = [MessageToStore("a", 0, b"x" * 100, {"KEYS": f"k{i}"}) for i in range(10)]
    enc = encoder(msgs, 0, 0, 600, 1, STORE_HOST, {}, 1 << 20)
    assert enc.segment_full and enc.consumed < 10
    end = sum(e.size for e in enc.entries)
    assert enc.size == len(enc.data) == end + 8
    assert check_record(enc.data, end, len(enc.data) + (600 - len(enc.data))) == 600 - end
    assert struct.unpack_from(">iI", enc.data, end) == (600 - end, BLANK_MAGIC)
    # a message rolled to the next segment is indexed there, not at the marker
    assert [r[3] for r in enc.index_requests] == [e.physical_offset for e in enc.entries]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(lambda b: b[:4] + b"\xde\xad\xbe\xef" + b[8:], "expected magic 0xDAA320A7", id="magic"),
        pytest.param(lambda b: b[:90] + b"Z" + b[91:], "expected body CRC", id="crc"),
        pytest.param(lambda b: b[:-3], "total size", id="truncated"),
        pytest.param(
            lambda b: b[:84] + (10_000).to_bytes(4, "big") + b[88:], "body length 10000", id="body-len"
        ),
        pytest.param(lambda b: bytes(len(b)), "expected magic", id="zeroes"),
    ],
)
def test_corrupt_record_names_expected_and_found(mutate: object, expected: str) -> None:
    data = encode([MessageToStore("ns%t", 0, b"abcdef", {"KEYS": "k"})])
    bad = mutate(data)  # type: ignore[operator]
    with pytest.raises(CorruptRecordError, match=expected):
        check_record(bad, 0, len(bad))
    with pytest.raises(CorruptRecordError):
        decode_record(bad, 0, len(bad), "X")


def test_properties_reject_separators() -> None:
    assert decode_properties(encode_properties({"a": "1", "b": ""})) == {"a": "1", "b": ""}
    with pytest.raises(StoreError):
        encode_properties({"a": "x\x01y"})


def test_message_id_round_trip() -> None:
    prefix = make_message_id_prefix(("10.1.2.3", 8081))
    assert decode_message_id(f"{prefix}{12345:016X}") == (("10.1.2.3", 8081), 12345)
    with pytest.raises(StoreError):
        decode_message_id("nothex" * 6)


VALID = encode([MessageToStore("ns%t", 1, b"payload" * 10, {"KEYS": "a b", "TAGS": "t", "UNIQ_KEY": "U"})])


def _decoders(data: bytes) -> None:
    for call in (
        lambda: check_record(data, 0, len(data)),
        lambda: decode_record(data, 0, len(data), "X"),
        lambda: decode_properties(data),
        lambda: StoreCheckpoint.decode(data),
        lambda: decode_message_id(data.decode("latin-1")),
    ):
        try:
            call()
        except StoreError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data: bytes) -> None:
    _decoders(data)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_fuzz_mutated_record(mutations: list[tuple[int, int]]) -> None:
    data = bytearray(VALID)
    for index, value in mutations:
        data[index] = value
    _decoders(bytes(data))
    try:
        got = check_record(bytes(data), 0, len(data))
    except CorruptRecordError:
        return
    # a mutation that passes validation must have touched only fields the CRC does not cover
    assert not isinstance(got, int) or got >= 8


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(VALID)))
def test_fuzz_truncated_record(cut: int) -> None:
    data = VALID[:cut]
    if cut < len(VALID):
        with pytest.raises(CorruptRecordError):
            check_record(data, 0, len(data))
    _decoders(data)


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=12)
_message = st.builds(
    MessageToStore,
    topic=st.sampled_from(["a", "ns%t", "t\u00e9", "x" * 40]),
    queue_id=st.integers(0, 5),
    body=st.binary(max_size=300),
    properties=st.dictionaries(
        st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY"]), _text),
        st.one_of(st.just(""), _text),
        max_size=4,
    ),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.integers(0, 255),
    born_timestamp=st.integers(0, 2**62),
    born_host=st.sampled_from([("10.0.0.1", 99), ("127.0.0.1", 0), ("192.168.1.254", 65535)]),
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(-1, 2**40),
)


def _outcome(encoder: Encoder, *args: object) -> tuple[object, ...]:
    try:
        enc = encoder(*args)
    except StoreError as exc:
        return ("error", type(exc).__name__)
    runs = {key: (first, bytes(packed)) for key, (first, packed) in enc.queue_runs.items()}
    return (enc.data, enc.size, enc.consumed, enc.entries, runs, enc.index_requests, enc.segment_full)


@settings(max_examples=400, deadline=None)
@given(
    msgs=st.lists(_message, min_size=1, max_size=12),
    start=st.integers(0, 3),
    base=st.integers(0, 2**40),
    space=st.integers(8, 3000),
    offsets=st.dictionaries(st.tuples(st.just("a"), st.integers(0, 5)), st.integers(0, 2**40), max_size=3),
    max_size=st.sampled_from([200, 1 << 20]),
)
def test_compiled_and_python_encoders_agree_byte_for_byte(
    msgs: list[MessageToStore], start: int, base: int, space: int, offsets: dict, max_size: int
) -> None:
    assert compiled_encode_batch is not None, "the C encoder is not built: run scripts/build_ext.py"
    start = min(start, len(msgs) - 1)
    args = (msgs, start, base, space, 1_700_000_000_123, STORE_HOST, offsets, max_size, "PREFIX")
    assert _outcome(compiled_encode_batch, *args) == _outcome(python_encode_batch, *args)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(MessageToStore("a", 0, b"x", {"k": 1}), id="property-not-str"),  # type: ignore[dict-item]
        pytest.param(MessageToStore("a", 2**31, b"x"), id="queue-id-overflow"),
        pytest.param(MessageToStore("a", 0, b"x", flag=2**40), id="flag-overflow"),
        pytest.param(MessageToStore("a", 0, b"x", born_host=("::1", 1)), id="born-host"),
        pytest.param(MessageToStore("a", 0, "text"), id="body-not-bytes"),  # type: ignore[arg-type]
        pytest.param(MessageToStore(7, 0, b"x"), id="topic-not-str"),  # type: ignore[arg-type]
    ],
)
def test_the_compiled_encoder_refuses_what_it_cannot_store(bad: MessageToStore) -> None:
    assert compiled_encode_batch is not None
    with pytest.raises((StoreError, TypeError)):
        compiled_encode_batch([MessageToStore("a", 0, b"ok"), bad], 0, 0, 1 << 20, 1, STORE_HOST, {}, 1 << 20)


def test_encoders_agree_on_a_batch_over_many_queues() -> None:
    # past 64 queues the compiled encoder finds a queue's run through a dict instead of a scan
    assert compiled_encode_batch is not None
    msgs = [MessageToStore(f"t{i % 3}", (i * 7) % 90, bytes([i % 256]) * (i % 50)) for i in range(600)]
    offsets = {("t1", 5): 40, ("t2", 89): 1_000}
    args = (msgs, 0, 4096, 1 << 20, 1, STORE_HOST, offsets, 1 << 20, "P")
    compiled = _outcome(compiled_encode_batch, *args)
    assert len(compiled[4]) > 64  # type: ignore[arg-type]
    assert compiled == _outcome(python_encode_batch, *args)


# The compiled decoder: every record it decodes is what the Python decoder gives; whatever it does
# not take (None) the Python decoder refuses with a CorruptRecordError that says why.


def _decoded_both_ways(data: bytes | bytearray | memoryview, pos: int = 0, check_crc: bool = True) -> object:
    assert compiled_decode_record is not None, "the C extension is not built: run scripts/build_ext.py"
    compiled = compiled_decode_record(data, pos, len(data), check_crc, StoredMessage)
    try:
        expected: object = python_decode_record(data, pos, len(data), "X", check_crc)
    except CorruptRecordError as exc:
        expected = exc
    if compiled is None:
        assert isinstance(expected, CorruptRecordError), expected
        return expected
    assert type(compiled) is StoredMessage and compiled == expected
    assert [type(v) for v in compiled] == [type(v) for v in expected]  # type: ignore[attr-defined]
    return compiled


@settings(max_examples=300, deadline=None)
@given(st.lists(_message, min_size=1, max_size=5), st.booleans())
def test_compiled_and_python_decoders_agree(msgs: list[MessageToStore], check_crc: bool) -> None:
    batch = python_encode_batch(msgs, 0, 4096, 1 << 20, 1_700_000_000_000, STORE_HOST, {}, 1 << 20)
    data = batch.data
    for entry in batch.entries:
        got = _decoded_both_ways(memoryview(data), entry.physical_offset - 4096, check_crc)
        assert isinstance(got, StoredMessage)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_the_compiled_decoder_leaves_damaged_records_to_the_python_one(
    mutations: list[tuple[int, int]],
) -> None:
    data = bytearray(VALID)
    for index, value in mutations:
        data[index] = value
    _decoded_both_ways(bytes(data))
    _decoded_both_ways(bytes(data), check_crc=False)
    _checked_both_ways(bytes(data), 0)  # check_record too (below): refused as its Python reference does


def test_the_compiled_decoder_reads_only_inside_the_buffer_and_the_limit() -> None:
    assert compiled_decode_record is not None
    assert compiled_decode_record(VALID, 0, len(VALID) - 1, True, StoredMessage) is None  # limit cuts it
    assert compiled_decode_record(VALID[:-1], 0, len(VALID) + 100, True, StoredMessage) is None  # buffer does
    assert compiled_decode_record(VALID, -1, len(VALID), True, StoredMessage) is None
    body_flipped = bytearray(VALID)
    body_flipped[HEADER_SIZE] ^= 1
    assert compiled_decode_record(bytes(body_flipped), 0, len(VALID), True, StoredMessage) is None
    assert compiled_decode_record(bytes(body_flipped), 0, len(VALID), False, StoredMessage) is not None
    with pytest.raises(CorruptRecordError, match="body CRC"):
        decode_record(bytes(body_flipped), 0, len(VALID), "X")


# check_record (recovery, replication) reads well-formed records with the compiled decoder: the same
# DispatchRequest as its Python reference; damaged ones get the reference's error (checked with the
# compiled decoder's damaged records above).


def _checked_both_ways(data: bytes, pos: int) -> object:
    try:
        expected: object = python_check_record(data, pos, len(data))
    except CorruptRecordError as exc:
        expected = exc
    if isinstance(expected, CorruptRecordError):
        with pytest.raises(type(expected), match=re.escape(str(expected))):
            check_record(data, pos, len(data))
        return expected
    got = check_record(data, pos, len(data))
    assert got == expected and type(got) is type(expected)
    return got


@settings(max_examples=300, deadline=None)
@given(st.lists(_message, min_size=1, max_size=5))
def test_check_record_and_its_python_reference_agree(msgs: list[MessageToStore]) -> None:
    assert compiled_decode_record is not None, "the C extension is not built: run scripts/build_ext.py"
    batch = python_encode_batch(msgs, 0, 4096, 1 << 20, 1_700_000_000_000, STORE_HOST, {}, 1 << 20)
    for entry in batch.entries:
        got = _checked_both_ways(batch.data, entry.physical_offset - 4096)
        assert not isinstance(got, (int, CorruptRecordError)) and got.physical_offset == entry.physical_offset

"""The CommitLog record format: golden layout, round trips, and corrupt input."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.store.checkpoint import StoreCheckpoint
from dataplane.store.errors import CorruptRecordError, StoreError
from dataplane.store.message import MessageToStore
from dataplane.store.record import (
    BLANK_MAGIC,
    HEADER_SIZE,
    MESSAGE_MAGIC,
    check_record,
    decode_message_id,
    decode_properties,
    decode_record,
    encode_batch,
    encode_properties,
    make_message_id_prefix,
)

STORE_HOST = (b"\x7f\x00\x00\x01", 10911)


def encode(msgs: list[MessageToStore], space: int = 1 << 20, base: int = 0) -> bytes:
    return encode_batch(msgs, 0, base, space, 1_700_000_000_000, STORE_HOST, {}, 1 << 20).data


def test_golden_layout() -> None:
    # given
    m = MessageToStore("ns%t", 3, b"abc", {"TAGS": "x"}, flag=7, born_timestamp=5, born_host=("10.0.0.1", 99))
    # when
    data = encode([m], base=4096)
    # then
    assert HEADER_SIZE == 88
    total, magic, crc, qid, flag, qoff, phys = struct.unpack_from(">iIIiiqq", data)
    expected = (len(data), MESSAGE_MAGIC, zlib.crc32(b"abc"), 3, 7, 0, 4096)
    assert (total, magic, crc, qid, flag, qoff, phys) == expected
    assert data[48:56] == b"\x0a\x00\x00\x01" + (99).to_bytes(4, "big")
    assert data[88:91] == b"abc"
    assert data[91:97] == b"\x00\x04ns%t"
    assert data[97:] == b"\x00\x07TAGS\x01x\x02"


def test_round_trip_and_queue_offsets() -> None:
    msgs = [MessageToStore("a", i % 2, bytes([i]) * i, {"KEYS": f"k{i} z"}) for i in range(10)]
    offsets: dict[tuple[str, int], int] = {}
    enc = encode_batch(msgs, 0, 0, 1 << 20, 42, STORE_HOST, offsets, 1 << 20)
    assert offsets == {("a", 0): 5, ("a", 1): 5}
    for (pos, qoff, size, _), m in zip(enc.placements, msgs, strict=True):
        got = decode_record(enc.data, pos, len(enc.data), "X")
        assert (got.body, got.queue_offset, got.size, got.physical_offset) == (m.body, qoff, size, pos)
        assert got.keys == m.properties["KEYS"].split()
        assert got.store_host == ("127.0.0.1", 10911)
        assert got.msg_id == make_message_id_prefix(("127.0.0.1", 10911)) + f"{pos:016X}"


def test_end_of_segment_marker() -> None:
    msgs = [MessageToStore("a", 0, b"x" * 100) for _ in range(10)]
    enc = encode_batch(msgs, 0, 0, 600, 1, STORE_HOST, {}, 1 << 20)
    assert enc.segment_full and enc.consumed < 10
    end = sum(p[2] for p in enc.placements)
    assert check_record(enc.data, end, len(enc.data) + (600 - len(enc.data))) == 600 - end
    assert struct.unpack_from(">iI", enc.data, end) == (600 - end, BLANK_MAGIC)


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

"""`dynalloc.data.records`: MXNet's RecordIO framing read by offset without MXNet, against files
that MXNet's own writer made: multi-part records, truncation, bad index lines, and the labels
that are not one class index."""

import os
import struct

import numpy as np
import pytest
from dynalloc.data.records import (
    IR_HEADER,
    MAGIC,
    PART,
    BadRecord,
    read_index,
    read_record,
    record_span,
    unpack,
)
from dynalloc.errors import DynallocError
from streamed_files import idx_offsets, mxnet, pack, write_records

MAGIC_BYTES = struct.pack("<I", MAGIC)


def read_ours(rec, key, head=4096):
    """(record_span's length, its head, read_record's bytes) of record `key`."""
    offset = idx_offsets(rec)[key]
    size = rec.stat().st_size
    with open(rec, "rb") as handle:
        length, first = record_span(handle, size, offset, str(rec), key, head)
    fd = os.open(rec, os.O_RDONLY)
    try:
        return length, first, read_record(fd, offset, length, str(rec), key)
    finally:
        os.close(fd)


def read_mxnet(rec, key):
    reader = mxnet().recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    try:
        return reader.read_idx(key)
    finally:
        reader.close()


def parts_at(rec, offset):
    """The continuation flags of the parts of the record at `offset`, as the file holds them."""
    data, flags = rec.read_bytes(), []
    while True:
        magic, word = PART.unpack_from(data, offset)
        assert magic == MAGIC
        flags.append(word >> 29)
        offset += PART.size + (((word & ((1 << 29) - 1)) + 3) & ~3)
        if flags[-1] in (0, 3):
            return flags


def test_a_record_holding_the_magic_word_is_split_and_joined_back(tmp_path):
    # The packed record is the 24-byte header, then this payload: the magic word sits at
    # record bytes 28, 36 and 40 (4-aligned, two in a row), so MXNet's writer cuts it there.
    payload = b"\1\2\3\4" + MAGIC_BYTES + b"abcd" + MAGIC_BYTES * 2 + b"tail!"
    # ... and at byte 2 of this one (not aligned): one part.
    unaligned = b"ab" + MAGIC_BYTES + b"cd"
    records = [pack(1.0, payload, 0), pack(2.0, unaligned, 1), pack(3.0, b"plain", 2)]
    rec = write_records(tmp_path / "set.rec", records)
    offsets = idx_offsets(rec)
    assert parts_at(rec, offsets[0]) == [1, 2, 2, 3]
    assert parts_at(rec, offsets[1]) == [0]
    for key, record in enumerate(records):
        length, first, ours = read_ours(rec, key)
        assert ours == read_mxnet(rec, key) == record
        assert first == record  # shorter than the head: all of it
        next_offset = offsets.get(key + 1, rec.stat().st_size)
        assert length == next_offset - offsets[key]  # its parts and their padding
    assert unpack(read_ours(rec, 0)[2], "set.rec", 0) == (1, payload)


def test_the_head_of_a_long_multi_part_record_is_its_first_bytes(tmp_path):
    payload = (b"x" * 100 + MAGIC_BYTES) * 60  # about 6 kB in 61 parts
    record = pack(0.0, payload)
    rec = write_records(tmp_path / "set.rec", [record])
    length, first, ours = read_ours(rec, 0, head=1000)
    assert ours == record and length == rec.stat().st_size
    assert len(first) >= 1000 and first == record[: len(first)]


def test_a_truncated_record_is_named(tmp_path):
    rec = write_records(tmp_path / "set.rec", [pack(0.0, b"a" * 100, k) for k in range(3)])
    offset = idx_offsets(rec)[2]
    full = rec.read_bytes()
    with open(rec, "rb") as handle:
        length, _ = record_span(handle, len(full), offset, "set.rec", 2)
    rec.write_bytes(full[:-10])
    with open(rec, "rb") as handle, pytest.raises(BadRecord, match="set.rec: record 2 is trunc"):
        record_span(handle, len(full) - 10, offset, "set.rec", 2)
    # Cut inside its part header.
    rec.write_bytes(full[: offset + 5])
    with open(rec, "rb") as handle, pytest.raises(BadRecord, match="record 2 is truncated"):
        record_span(handle, offset + 5, offset, "set.rec", 2)
    # Staged whole, then cut: the read says so.
    rec.write_bytes(full[:-10])
    fd = os.open(rec, os.O_RDONLY)
    try:
        with pytest.raises(BadRecord, match="record 2 is truncated"):
            read_record(fd, offset, length, "set.rec", 2)
        assert read_record(fd, 0, offset // 2, "set.rec", 0) == pack(0.0, b"a" * 100, 0)
    finally:
        os.close(fd)


def test_an_offset_inside_a_record_is_named(tmp_path):
    rec = write_records(tmp_path / "set.rec", [pack(0.0, b"a" * 100, k) for k in range(2)])
    with open(rec, "rb") as handle, pytest.raises(BadRecord, match="no RecordIO record starts"):
        record_span(handle, rec.stat().st_size, 12, "set.rec", 1)


def test_framing_changed_after_staging_is_found_when_read(tmp_path):
    """read_record checks the framing of the bytes it reads, not only their magic word."""
    record = pack(0.0, b"\1\2\3\4" + MAGIC_BYTES + b"abcd")  # two parts
    rec = write_records(tmp_path / "set.rec", [record])
    length, _, _ = read_ours(rec, 0)
    data = bytearray(rec.read_bytes())
    fd = os.open(rec, os.O_RDONLY)
    try:
        for position, value, text in (
            (4, (0 << 29) | 28, "broken framing"),  # first part now claims to be whole, 28 bytes
            (4, (1 << 29) | 4000, "broken framing"),  # a length beyond the record
            (36, MAGIC ^ 1, "no RecordIO record starts at byte 36"),  # second part's magic
        ):
            changed = bytearray(data)
            changed[position : position + 4] = struct.pack("<I", value)
            rec.write_bytes(bytes(changed))
            with pytest.raises(BadRecord, match=text):
                read_record(fd, 0, length, "set.rec", 0)
    finally:
        os.close(fd)


# ---- the index ------------------------------------------------------------------------------


def test_index_is_read_in_its_own_order(tmp_path):
    keys = [5, 2, 9]
    rec = write_records(tmp_path / "set.rec", [pack(0.0, b"x" * 10, k) for k in keys], keys)
    idx = rec.with_suffix(".idx")
    lines = idx.read_text().splitlines()
    idx.write_text("\n".join([lines[2], "", lines[0], lines[1]]) + "\n")  # blank lines skipped
    got_keys, offsets = read_index(idx, rec)
    assert got_keys.dtype == offsets.dtype == np.int64
    assert list(got_keys) == [9, 5, 2]
    assert list(offsets) == [idx_offsets(rec)[k] for k in (9, 5, 2)]


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("0\t0\n1\t99999\n", ["line 2", "record 1 starts at byte 99999", "set.rec has"]),
        ("0\t-4\n", ["line 1", "record 0 starts at byte -4"]),
        ("0\t0\nnonsense\n", ["line 2 is not 'key<TAB>offset'", "nonsense"]),
        ("0 0\n", ["line 1 is not 'key<TAB>offset'"]),
        ("0\t0\nx\t4\n", ["line 2 is not"]),
        ("0\t0\n3\t0\n3\t0\n", ["key 3 is listed twice"]),
        ("", ["lists no records"]),
        ("\n\n", ["lists no records"]),
    ],
    ids=["past the end", "negative", "no tab", "space", "bad key", "duplicate", "empty", "blank"],
)
def test_bad_index_lines_are_named(tmp_path, text, fragments):
    rec = write_records(tmp_path / "set.rec", [pack(0.0, b"x" * 10, k) for k in range(2)])
    idx = rec.with_suffix(".idx")
    idx.write_text(text)
    with pytest.raises(DynallocError) as caught:
        read_index(idx, rec)
    assert str(caught.value).startswith(f"{idx}: ")
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_an_index_that_is_not_text_is_named(tmp_path):
    rec = write_records(tmp_path / "set.rec", [pack(0.0, b"x")])
    idx = rec.with_suffix(".idx")
    idx.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(DynallocError, match="cannot read"):
        read_index(idx, rec)


# ---- labels ---------------------------------------------------------------------------------


def test_one_label_in_the_header_or_in_a_one_label_array(tmp_path):
    assert unpack(pack(7.0, b"image"), "f", 0) == (7, b"image")
    one = pack([4.0], b"image")  # flag 1: the label follows the header
    assert IR_HEADER.unpack_from(one)[0] == 1
    assert unpack(one, "f", 0) == (4, b"image")
    assert unpack(pack(0.0, b""), "f", 0) == (0, b"")


@pytest.mark.parametrize(
    ("record", "text"),
    [
        (b"short", "record 3 has no label: 5 bytes, shorter than the 24-byte header"),
        (b"", "record 3 has no label: 0 bytes"),
        (pack([1.0, 2.0], b"image"), "record 3 has 2 labels; a class needs one"),
        (struct.pack("<IfQQ", 1, 0.0, 0, 0), "record 3: its label is cut off"),
        (pack(1.5, b"image"), "record 3 has label 1.5, not a class index"),
        (pack(-1.0, b"image"), "record 3 has label -1, not a class index"),
        (pack(float("nan"), b"image"), "record 3 has label nan"),
        (pack(float("inf"), b"image"), "record 3 has label inf"),
        (pack([2.5], b"image"), "record 3 has label 2.5"),
        (pack(3e9, b"image"), "record 3 has label 3e+09, not a class index"),  # over int32
    ],
    ids=[
        "short", "empty", "two labels", "cut label", "fraction", "negative", "nan", "inf",
        "fraction in array", "huge",
    ],
)  # fmt: skip
def test_records_without_one_class_index_are_named(record, text):
    with pytest.raises(BadRecord) as caught:
        unpack(record, "/data/set.rec", 3)
    assert str(caught.value) == f"/data/set.rec: {text}" or text in str(caught.value)
    assert str(caught.value).startswith("/data/set.rec: record 3")


def test_the_largest_int32_label_is_kept(tmp_path):
    """Labels go into an int32 column: the largest float32 below 2**31 still fits."""
    label = float(np.nextafter(np.float32(2**31), np.float32(0)))
    assert unpack(pack(label, b"x"), "f", 0)[0] == int(label) < 2**31

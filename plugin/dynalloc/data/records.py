"""MXNet's RecordIO framing, read by byte offset without MXNet.

Why our own reader and not `mx.recordio.MXIndexedRecordIO`: that class loads the whole `.idx`
into a Python dict on every rank (about 100 bytes a record: 120 MB for ImageNet's 1.2 M) and
reads through one shared file position, so decode threads could not read side by side. Here a
record is one `os.pread` at the offset and length that staging recorded, so any number of
threads read one descriptor at once, and a rank holds its index as a numpy array.

The format (dmlc-core's recordio.h): each part is a little-endian uint32 magic word, a uint32
of (continuation flag << 29 | length), then the bytes, padded to 4. A writer splits a record
wherever its bytes hold the magic word at a 4-aligned position (flag 1 opens, 2 continues, 3
ends; 0 is a record of one part) and a reader joins the parts with the magic word between them.
An image record (`mx.recordio.pack`) starts with IRHeader (flag, label, id, id2); flag > 0
means `flag` float32 labels follow it in place of the one in the header.
"""

import os
import struct

import numpy as np

from dynalloc.errors import DynallocError

MAGIC = 0xCED7230A
PART = struct.Struct("<II")
IR_HEADER = struct.Struct("<IfQQ")
LENGTH_MASK = (1 << 29) - 1
LABEL_LIMIT = 2**31  # labels are int32 in the staged index


class BadRecord(DynallocError):
    """A record that cannot be read or unpacked; the message names the file and the record."""


def read_pair(rec_path):
    """(idx_path, keys, offsets) of a `.rec` and the `.idx` beside it, as im2rec writes them."""
    if not rec_path.is_file():
        raise DynallocError(f"{rec_path}: RecordIO file not found")
    idx_path = rec_path.with_suffix(".idx")
    if not idx_path.is_file():
        raise DynallocError(f"{idx_path}: index missing (expected beside {rec_path.name})")
    return (idx_path, *read_index(idx_path, rec_path))


def read_index(idx_path, rec_path):
    """(keys, offsets) of an `.idx` file in its own order (int64 arrays), each offset checked
    against the size of the `.rec` file."""
    size = os.path.getsize(rec_path)
    keys, offsets = [], []
    try:
        with open(idx_path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                fields = line.split("\t")
                try:
                    key, offset = int(fields[0]), int(fields[1])
                except (IndexError, ValueError):
                    raise DynallocError(
                        f"{idx_path}: line {number} is not 'key<TAB>offset': {line.strip()[:60]!r}"
                    ) from None
                if not 0 <= offset < size:
                    raise DynallocError(
                        f"{idx_path}: line {number}: record {key} starts at byte {offset}, but "
                        f"{rec_path} has {size} bytes (truncated, or the index of another file)"
                    )
                keys.append(key)
                offsets.append(offset)
    except (OSError, UnicodeDecodeError) as error:
        raise DynallocError(f"{idx_path}: cannot read ({error})") from None
    if not keys:
        raise DynallocError(f"{idx_path}: lists no records")
    keys, offsets = np.asarray(keys, np.int64), np.asarray(offsets, np.int64)
    unique, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        raise DynallocError(f"{idx_path}: key {int(unique[counts > 1][0])} is listed twice")
    return keys, offsets


def record_span(handle, size, offset, name, key, head=4096):
    """(bytes on disk, the record's first `head` bytes joined) of the record at `offset` of an
    open binary file of `size` bytes, reading its part headers but not the rest of its bytes."""
    position, parts, first = offset, 0, b""
    while True:
        handle.seek(position)
        header = handle.read(PART.size)
        if len(header) < PART.size:
            raise BadRecord(f"{name}: record {key} is truncated (the file ends at byte {position})")
        magic, word = PART.unpack(header)
        if magic != MAGIC:
            raise BadRecord(f"{name}: record {key}: no RecordIO record starts at byte {position}")
        flag, length = word >> 29, word & LENGTH_MASK
        if flag not in ((0, 1) if parts == 0 else (2, 3)):
            raise BadRecord(f"{name}: record {key}: broken multi-part framing at byte {position}")
        if len(first) < head:
            joint = struct.pack("<I", MAGIC) if parts else b""
            first += joint + handle.read(min(length, head - len(first)))
        if position + PART.size + length > size:
            raise BadRecord(
                f"{name}: record {key} is truncated: it needs bytes up to "
                f"{position + PART.size + length}, the file has {size}"
            )
        position += PART.size + ((length + 3) & ~3)
        parts += 1
        if flag in (0, 3):
            return min(position, size) - offset, first


def read_record(fd, offset, length, name, key):
    """The joined bytes of the record at `offset` spanning `length` bytes on disk; BadRecord if
    its framing no longer spans exactly those bytes (the file changed since they were measured)."""
    data = os.pread(fd, length, offset)
    if len(data) < length:
        raise BadRecord(
            f"{name}: record {key} is truncated (the file ends before byte {offset + length})"
        )
    pieces, position = [], 0
    while True:
        magic, word = PART.unpack_from(data, position) if position + 8 <= length else (0, 0)
        if magic != MAGIC:
            raise BadRecord(
                f"{name}: record {key}: no RecordIO record starts at byte {offset + position}"
            )
        flag, size = word >> 29, word & LENGTH_MASK
        end = position + PART.size + size
        last = flag in (0, 3)
        padded = position + PART.size + ((size + 3) & ~3)
        # The last part ends the bytes measured at staging (its padding may lie past the end).
        if (
            flag not in ((0, 1) if not pieces else (2, 3))
            or end > length
            or (last and not 0 <= padded - length < 4)
        ):
            raise BadRecord(
                f"{name}: record {key}: broken framing at byte {offset + position} (the file "
                "changed since staging?)"
            )
        pieces.append(data[position + PART.size : end])
        position = padded
        if last:
            return struct.pack("<I", MAGIC).join(pieces)


def unpack(record, name, key):
    """(label, image bytes) of an image record with exactly one integer label >= 0."""
    if len(record) < IR_HEADER.size:
        raise BadRecord(
            f"{name}: record {key} has no label: {len(record)} bytes, shorter "
            f"than the {IR_HEADER.size}-byte header"
        )
    flag, label, _, _ = IR_HEADER.unpack_from(record)
    start = IR_HEADER.size
    if flag > 0:
        if flag != 1:
            raise BadRecord(f"{name}: record {key} has {flag} labels; a class needs one")
        if len(record) < start + 4:
            raise BadRecord(f"{name}: record {key}: its label is cut off")
        (label,) = struct.unpack_from("<f", record, start)
        start += 4
    if not (np.isfinite(label) and 0 <= label < LABEL_LIMIT and float(label).is_integer()):
        raise BadRecord(f"{name}: record {key} has label {label:g}, not a class index")
    return int(label), record[start:]

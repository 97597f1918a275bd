"""Reader of an MXNet RecordIO pair of encoded images (PNG, JPEG).

The longest reader: MXNet's image decoder does not reliably fail on damaged images, so this
module checks each image's framing itself and captures what libpng and libjpeg print on fd 2.
"""

import struct
import sys

import numpy as np

from dynalloc.data.images import JPEG_START, PNG_SIGNATURE, damage_in, decoded_and_said
from dynalloc.data.records import read_pair
from dynalloc.data.source import SourceData, stratified_split
from dynalloc.errors import DynallocError


def read_recordio(args, rng):
    """An MXNet RecordIO pair (.rec + .idx, as im2rec or MXIndexedRecordIO write them) of images
    packed with `mx.recordio.pack_img`, split per class like mnist5k.

    Grayscale images give one channel, colour ones three (RGB); all must share one size.
    """
    rec_path = args.path
    idx_path, keys, offsets = read_pair(rec_path)
    offsets = dict(zip(keys.tolist(), offsets.tolist(), strict=True))
    try:
        import mxnet as mx  # heavy, and needed by this source only
    except ImportError:
        raise DynallocError("--source recordio: needs mxnet, which is not installed") from None
    labels, payloads = _read_records(mx, rec_path, idx_path, offsets)
    x = _decode_images(mx, rec_path, list(offsets), payloads)
    y = np.asarray(labels, dtype=np.int64)
    return SourceData(
        *stratified_split(x, y, args.test_fraction, rng, str(rec_path)),
        classes=int(y.max()) + 1,
        details={"origin": str(rec_path)},
    )


def _read_records(mx, rec_path, idx_path, offsets):
    """Labels and encoded images of every record, in index order."""
    labels, payloads = [], []
    record_file = mx.recordio.MXIndexedRecordIO(str(idx_path), str(rec_path), "r")
    try:
        for key in offsets:
            try:
                item = record_file.read_idx(key)
                header, payload = mx.recordio.unpack(item) if item is not None else (None, b"")
            except (mx.base.MXNetError, struct.error, ValueError):
                item = None
            if item is None:
                raise DynallocError(f"{rec_path}: record {key} is truncated or corrupt")
            labels.append(_record_label(rec_path, key, header))
            payloads.append(payload)
    finally:
        record_file.close()
    return labels, payloads


def _record_label(rec_path, key, header):
    label = np.atleast_1d(np.asarray(header.label, dtype=np.float64))
    if label.size != 1:
        raise DynallocError(
            f"{rec_path}: record {key} has {label.size} labels; staging needs one class per image"
        )
    value = float(label[0])
    if not (value >= 0 and value.is_integer()):
        raise DynallocError(f"{rec_path}: record {key} has label {value:g}, not a class index")
    return int(value)


def _decode_images(mx, rec_path, keys, payloads):
    """(N, C, H, W) uint8, C = 1 when every image is stored as grayscale, else 3 (RGB).

    MXNet's decoder does not always fail on a damaged image: a PNG cut after its header, or a
    JPEG cut anywhere, can come back as an image of the right size filled with zeros or grey.
    So an image must also end as its format requires, and damage that libjpeg or libpng
    reports on fd 2 while decoding it rejects it (`images.DAMAGE`); anything else printed there
    is passed on after the decoding.
    """
    channels = 1 if all(_encoded_channels(payload) == 1 for payload in payloads) else 3
    images, notes = None, []
    for i, (key, payload) in enumerate(zip(keys, payloads, strict=True)):
        problem = _incomplete(payload)
        if problem is None:
            try:
                image, said = decoded_and_said(
                    lambda p=payload: mx.image.imdecode(p, flag=int(channels == 3)).asnumpy()
                )
            except (mx.base.MXNetError, ValueError):
                image, said, problem = None, [], "not a decodable image"
            errors = damage_in(said)
            if errors:
                problem = "; ".join(errors)
            notes += [line for line in said if line not in errors]
        if problem is not None:
            raise DynallocError(f"{rec_path}: record {key}: cannot decode the image ({problem})")
        if images is None:
            first_key, (height, width) = key, image.shape[:2]
            images = np.empty((len(payloads), channels, height, width), dtype=np.uint8)
        if image.shape[:2] != (height, width):
            raise DynallocError(
                f"{rec_path}: record {key} is {image.shape[0]}x{image.shape[1]} pixels, but "
                f"record {first_key} is {height}x{width}; all images need one size"
            )
        images[i] = image.transpose(2, 0, 1)
    for line in notes:  # what the decoder said of images that did decode
        print(f"{rec_path}: {line}", file=sys.stderr)
    return images


PNG_END = b"\0\0\0\0IEND\xaeB`\x82"  # the IEND chunk every PNG ends with
JPEG_END = b"\xff\xd9"


def _incomplete(payload):
    """Why an encoded PNG or JPEG image is cut short, or None."""
    if payload[:8] == PNG_SIGNATURE and not payload.endswith(PNG_END):
        return "PNG without its IEND chunk: truncated"
    if payload[:2] == JPEG_START and not payload.rstrip(b"\0").endswith(JPEG_END):
        return "JPEG without its end-of-image marker: truncated"
    return None


def _encoded_channels(payload):
    """1 if an encoded PNG or JPEG image is grayscale, else 3 (also for anything unrecognised)."""
    if payload[:8] == PNG_SIGNATURE and len(payload) > 25:
        return 1 if payload[25] in (0, 4) else 3  # IHDR colour type: gray, gray + alpha
    if payload[:2] == JPEG_START:
        pos = 2
        while pos + 4 <= len(payload) and payload[pos] == 0xFF:
            marker = payload[pos + 1]
            if marker == 0xFF:  # fill byte
                pos += 1
                continue
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame
                return 1 if pos + 9 < len(payload) and payload[pos + 9] == 1 else 3
            if 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
                pos += 2
                continue
            pos += 2 + int.from_bytes(payload[pos + 2 : pos + 4], "big")
    return 3

"""Encoded images (JPEG, PNG): their size and channels from the first bytes, and their pixels.

Staging reads only a header per image (`image_info`); the ranks decode (`decode_into`) with
OpenCV, the library MXNet's own `mx.image.imdecode` runs inside libmxnet, called directly:
every `mx.image` call (`imdecode`, `fixed_crop`, `flip`) is an NDArray operator queued on the
engine, the very thread that computes the gradients. Measured here (`make bench-stream` prints
it), a 28x28 JPEG decoded, cropped, resized and flipped costs about 0.035 ms with OpenCV, 0.17
ms with Pillow and 0.96 ms through `mx.image`, against about 1 ms of a LeNet forward and
backward per sample. OpenCV releases the GIL, so the decode threads run beside the rank's compute.
"""

import os
import struct
import sys
import tempfile
import threading

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_START = b"\xff\xd8"
# Start-of-frame markers: every SOFn but DHT (C4), JPG (C8) and DAC (CC).
JPEG_FRAMES = {m for m in range(0xC0, 0xD0) if m not in (0xC4, 0xC8, 0xCC)}


class BadImage(ValueError):
    """An image that cannot be decoded; the message says why."""


def image_info(head):
    """(height, width, channels) of an encoded JPEG or PNG from its first bytes, channels 1 for
    grayscale and 3 for anything else; None if `head` is neither or too short to tell."""
    if head[:8] == PNG_SIGNATURE and len(head) >= 26 and head[12:16] == b"IHDR":
        width, height = struct.unpack(">II", head[16:24])
        return height, width, 1 if head[25] in (0, 4) else 3  # colour type gray, gray + alpha
    if head[:2] != JPEG_START:
        return None
    pos = 2
    while pos + 4 <= len(head):
        if head[pos] != 0xFF:
            return None
        marker = head[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
        elif 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
            pos += 2
        elif marker in JPEG_FRAMES:
            if pos + 10 > len(head):
                return None
            height, width = struct.unpack(">HH", head[pos + 5 : pos + 9])
            return height, width, 1 if head[pos + 9] == 1 else 3
        else:
            pos += 2 + int.from_bytes(head[pos + 2 : pos + 4], "big")
    return None


def decode_pixels(payload, channels, said=None):
    """(H, W, channels) uint8 pixels (RGB order) of an encoded JPEG or PNG at its own size; an
    image that does not decode, is cut short, or that its decoder calls damaged while decoding
    it (`DAMAGE`) raises BadImage. What else the decoder says goes to `said` (a list) when
    given, else to stderr."""
    problem = _not_whole(payload)
    if problem:
        raise BadImage(f"cannot decode the image ({problem})")
    cv2 = _opencv()
    flags = cv2.IMREAD_GRAYSCALE if channels == 1 else cv2.IMREAD_COLOR
    # The pixels as stored, as the header staging read describes them: no EXIF rotation.
    image, lines = decoded_and_said(
        lambda: cv2.imdecode(
            np.frombuffer(payload, np.uint8), flags | cv2.IMREAD_IGNORE_ORIENTATION
        )
    )
    damage = damage_in(lines)
    if image is None:
        raise BadImage(
            f"cannot decode the image ({'; '.join(damage) or 'not a complete JPEG or PNG'})"
        )
    if damage:
        raise BadImage(f"a damaged image, which decodes to wrong pixels ({'; '.join(damage)})")
    if said is not None:
        said += lines
    elif lines:
        print("\n".join(lines), file=sys.stderr)
    if channels == 3:
        image = image[:, :, ::-1]  # OpenCV's BGR
    return image.reshape(*image.shape[:2], channels)


def _not_whole(payload):
    """Why `payload` is not a whole JPEG or PNG as far as its bytes tell, or None.

    OpenCV fails on a PNG cut short, but returns a JPEG cut short with grey below the cut (as
    `mx.image.imdecode`, the same library, does): a JPEG's last scan must be followed by its
    end-of-image marker. Entropy-coded bytes cannot hold 0xFFD9, so an EOI seen only before the
    last start-of-scan (an EXIF thumbnail's) does not count.
    """
    if payload[:8] == PNG_SIGNATURE:
        return None
    if payload[:2] != JPEG_START:
        return "neither a JPEG nor a PNG"
    if payload.rfind(b"\xff\xd9") < payload.rfind(b"\xff\xda"):
        return "a JPEG without its end-of-image marker: truncated"
    return None


def decode_into(out, payload, channels, box, flip):
    """Decode `payload`, cut `box` (left, top, right, bottom, in its pixels), resize that to
    out's (H, W) (area-averaged when shrinking, bilinear when enlarging), mirror it if `flip`,
    and write it into `out` (H, W, channels)."""
    cv2 = _opencv()
    image = decode_pixels(payload, channels)
    left, top, right, bottom = (round(float(v)) for v in box)
    # A box under a pixel wide (the centre of an image one pixel high, say): that one pixel.
    right, bottom = max(right, left + 1), max(bottom, top + 1)
    crop = image[top:bottom, left:right]
    if crop.shape[0] != bottom - top or crop.shape[1] != right - left or crop.size == 0:
        raise BadImage(
            f"decodes to {image.shape[0]}x{image.shape[1]} pixels, not the size its header gives"
        )
    height, width = out.shape[:2]
    shrink = crop.shape[0] >= height and crop.shape[1] >= width
    interpolation = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    resized = cv2.resize(crop, (width, height), interpolation=interpolation)
    if flip:
        resized = resized[:, ::-1]
    out[...] = resized.reshape(out.shape)


def _opencv():
    """cv2, imported when first needed (staging's header pass needs none of it), single-threaded:
    the decode pool is where the parallelism is."""
    import cv2

    if cv2.getNumThreads() != 1:
        cv2.setNumThreads(1)
    return cv2


# Damage that libjpeg and libpng report only as a line on file descriptor 2 while the image
# still decodes, to wrong pixels: entropy-coded bytes overwritten, a stream cut, a CRC wrong.
DAMAGE = ("Corrupt JPEG data", "Premature end of JPEG file", "Invalid SOS parameters",
          "libpng error", "CRC error", "IDAT")  # fmt: skip
_CAPTURE = threading.Lock()  # fd 2 is the process's: one decode at a time says what it said
_sink = None


def decoded_and_said(decode):
    """(what `decode()` returned, the lines the decoder printed meanwhile): file descriptor 2,
    where libjpeg and libpng print, routed into a file of this process's for the call. The
    decode threads take turns here, for the decode itself only (the crop, the resize and the
    read-ahead overlap), since nothing else tells which image a line of libjpeg's was about."""
    global _sink
    with _CAPTURE:
        if _sink is None:  # kept open for the process's life, emptied after each decode
            _sink = tempfile.TemporaryFile()  # noqa: SIM115
        fd = _sink.fileno()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(fd, 2)
        try:
            result = decode()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        size = os.fstat(fd).st_size
        text = os.pread(fd, size, 0) if size else b""
        if size:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)  # fd 2 wrote through the same offset
    lines = [line.strip() for line in text.decode(errors="replace").splitlines()]
    return result, [line for line in lines if line]


def damage_in(lines):
    """The lines of a decoder's that say its image is damaged."""
    return [line for line in lines if any(mark in line for mark in DAMAGE)]

"""Encoded images (JPEG, PNG): their size and channels from the first bytes, and their pixels.

Staging reads only a header per image (`image_info`); the ranks decode (`decode_into`).
Pillow decodes, not MXNet's `mx.image.imdecode`: measured here (`make bench-stream` prints it),
a 28x28 JPEG costs about 0.17 ms decoded, cropped, resized and flipped with Pillow and 0.9 ms
with `imdecode`, `fixed_crop` and `flip`, whose every call is an NDArray operator queued on the
engine, the very thread that computes the gradients. At 0.9 ms decoding would cost a LeNet rank
about as much as its forward and backward; Pillow also fails on a truncated image, where
`imdecode` can return a grey one. Both wrap libjpeg(-turbo) and libpng.
"""

import io
import struct
import warnings

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


def open_image(payload, channels):
    """A Pillow image of the encoded `payload` in mode L (channels 1) or RGB (3), fully decoded:
    a truncated or damaged image raises BadImage here, not as grey pixels later."""
    from PIL import Image  # only the ranks and staging's sample need Pillow

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(payload))
            if image.format not in ("JPEG", "PNG"):
                raise BadImage(f"a {image.format} image; JPEG or PNG are read")
            image.load()
    except BadImage:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombWarning) as error:
        raise BadImage(f"cannot decode the image ({error})") from None
    mode = "L" if channels == 1 else "RGB"
    return image if image.mode == mode else image.convert(mode)


def decode_pixels(payload, channels):
    """(H, W, channels) uint8 pixels of an encoded image at its own size."""
    array = np.asarray(open_image(payload, channels), dtype=np.uint8)
    return array.reshape(*array.shape[:2], channels)


def decode_into(out, payload, channels, box, flip):
    """Decode `payload`, cut `box` (left, top, right, bottom, in its pixels), resize that to
    out's (H, W) bilinearly, mirror it if `flip`, and write it into `out` (H, W, channels)."""
    from PIL import Image

    image = open_image(payload, channels)
    height, width = out.shape[:2]
    image = image.resize((width, height), Image.BILINEAR, box=tuple(float(v) for v in box))
    if flip:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    out[...] = np.asarray(image, dtype=np.uint8).reshape(out.shape)

"""`dynalloc.data.images`: an image's size and channels from its first bytes (`image_info`), and
its pixels decoded (OpenCV), cut, resized and mirrored (`decode_pixels`, `decode_into`), on
JPEGs and PNGs that Pillow encodes here: an independent encoder, and the reference for the
pixels."""

import io

import numpy as np
import pytest
from dynalloc.data.images import BadImage, decode_into, decode_pixels, image_info
from streamed_files import Image, encode, smooth

RNG = np.random.default_rng(0)
GRAY = smooth(RNG, (13, 21))
RGB = smooth(RNG, (13, 21, 3))


def big_exif():
    """EXIF (an APP1 segment) of about 9 kB: the JPEG's frame header lies beyond 4096 bytes."""
    exif = Image.Exif()
    exif[0x010E] = "x" * 9000  # ImageDescription
    return exif.tobytes()


@pytest.mark.parametrize(
    ("payload", "info"),
    [
        (encode(GRAY, "JPEG"), (13, 21, 1)),
        (encode(RGB, "JPEG"), (13, 21, 3)),
        (encode(RGB, "JPEG", progressive=True), (13, 21, 3)),
        (encode(GRAY, "JPEG", progressive=True), (13, 21, 1)),
        (encode(Image.fromarray(RGB).convert("CMYK"), "JPEG"), (13, 21, 3)),
        (encode(RGB, "JPEG", exif=big_exif()), (13, 21, 3)),
        (encode(GRAY, "PNG"), (13, 21, 1)),
        (encode(RGB, "PNG"), (13, 21, 3)),
        (encode(Image.fromarray(RGB).convert("P"), "PNG"), (13, 21, 3)),
        (encode(Image.fromarray(GRAY).convert("LA"), "PNG"), (13, 21, 1)),
        (encode(Image.fromarray(RGB).convert("RGBA"), "PNG"), (13, 21, 3)),
        (encode(GRAY.astype(np.uint16) * 250, "PNG"), (13, 21, 1)),
    ],
    ids=[
        "jpeg gray", "jpeg rgb", "progressive", "progressive gray", "jpeg cmyk", "jpeg big exif",
        "png gray", "png rgb", "png palette", "png gray+alpha", "png rgba", "png 16-bit gray",
    ],
)  # fmt: skip
def test_image_info_reads_size_and_channels_from_the_header(payload, info):
    assert image_info(payload) == info
    height, width, channels = info
    pixels = decode_pixels(payload, channels)
    assert pixels.shape == (height, width, channels) and pixels.dtype == np.uint8


def test_a_frame_header_beyond_the_first_bytes_needs_more_of_them():
    payload = encode(RGB, "JPEG", exif=big_exif())
    assert len(payload) > 9000
    assert image_info(payload[:4096]) is None  # staging then reads the whole image
    assert image_info(payload) == (13, 21, 3)


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"hello, world, this is text and not an image at all",
        encode(GRAY, "PNG")[:20],  # the signature but not the header
        encode(RGB, "JPEG", exif=big_exif())[:200],  # cut inside the EXIF segment
        encode(RGB, "GIF"),
        encode(RGB, "BMP"),
        b"\xff\xd8\x00\x00\x00\x00",  # JPEG start, then not a marker
    ],
    ids=["empty", "text", "png cut", "jpeg cut", "gif", "bmp", "jpeg garbage"],
)
def test_image_info_is_none_for_what_it_cannot_tell(head):
    assert image_info(head) is None


def test_jpeg_fill_bytes_before_a_marker_are_skipped():
    payload = encode(RGB, "JPEG")
    # 0xFF fill bytes may precede any marker: put two before the first one after SOI.
    filled = payload[:2] + b"\xff\xff" + payload[2:]
    assert image_info(filled) == (13, 21, 3)
    np.testing.assert_array_equal(decode_pixels(filled, 3), decode_pixels(payload, 3))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
@pytest.mark.parametrize("keep", [0.5, 0.9, -1])
def test_a_truncated_image_raises_bad_image(fmt, keep):
    """OpenCV returns a JPEG cut short with grey below the cut; decode_pixels refuses it."""
    payload = encode(smooth(RNG, (64, 64, 3)) ^ RNG.integers(0, 255, (64, 64, 3), np.uint8), fmt)
    cut = payload[:keep] if keep == -1 else payload[: int(len(payload) * keep)]
    assert image_info(cut) == (64, 64, 3)  # its header is intact
    with pytest.raises(BadImage, match="cannot decode the image"):
        decode_pixels(cut, 3)
    out = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(BadImage):
        decode_into(out, cut, 3, (0, 0, 64, 64), False)


def test_an_end_marker_inside_an_embedded_thumbnail_does_not_make_a_cut_jpeg_whole():
    thumbnail = encode(smooth(RNG, (8, 8, 3)), "JPEG")
    main = encode(smooth(RNG, (64, 64, 3)) ^ RNG.integers(0, 255, (64, 64, 3), np.uint8), "JPEG")
    segment = b"\xff\xef" + (len(thumbnail) + 2).to_bytes(2, "big") + thumbnail  # APP15
    whole = main[:2] + segment + main[2:]
    assert decode_pixels(whole, 3).shape == (64, 64, 3)
    np.testing.assert_array_equal(decode_pixels(whole, 3), decode_pixels(main, 3))
    cut = whole[: len(whole) * 3 // 4]
    assert b"\xff\xd9" in cut  # the thumbnail's
    with pytest.raises(BadImage, match="truncated"):
        decode_pixels(cut, 3)


def test_bytes_after_the_end_of_a_jpeg_are_no_harm():
    payload = encode(RGB, "JPEG")
    for tail in (b"\0" * 7, b"trailer data of a camera"):
        np.testing.assert_array_equal(decode_pixels(payload + tail, 3), decode_pixels(payload, 3))


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (b"plain text, not an image", "neither a JPEG nor a PNG"),
        (b"", "neither a JPEG nor a PNG"),
        (encode(RGB, "GIF"), "neither a JPEG nor a PNG"),
        (encode(RGB, "BMP"), "neither a JPEG nor a PNG"),
        (b"\x89PNG\r\n\x1a\n", "cannot decode the image .libpng error: PNG input buffer is"),
        (b"\xff\xd8\xff\xd9", "not a complete JPEG or PNG"),
    ],
    ids=["text", "empty", "gif", "bmp", "png signature only", "jpeg markers only"],
)
def test_what_is_not_a_jpeg_or_png_raises_bad_image(payload, text):
    with pytest.raises(BadImage, match=text):
        decode_pixels(payload, 3)


def test_a_damaged_png_chunk_raises_bad_image():
    payload = bytearray(encode(RGB, "PNG"))
    payload[60] ^= 0xFF  # inside IDAT: its CRC no longer matches
    with pytest.raises(BadImage):
        decode_pixels(bytes(payload), 3)


def overwritten_jpeg():
    """A JPEG whose entropy-coded bytes were overwritten, its markers, size and end intact:
    libjpeg decodes it to wrong pixels and says so only on file descriptor 2."""
    noise = (np.random.default_rng(0).random((64, 64, 3)) * 255).astype(np.uint8)
    payload = bytearray(encode(noise, "JPEG"))
    start = payload.rfind(b"\xff\xda") + 200
    payload[start : start + 8] = b"\x13\x37\x42\x00\x11\x22\x33\x44"
    return bytes(payload)


def test_an_image_its_decoder_calls_damaged_is_bad_though_it_decodes(capfd):
    with pytest.raises(BadImage, match=r"a damaged image, which decodes to wrong pixels \(Corrupt"):
        decode_pixels(overwritten_jpeg(), 3)
    assert capfd.readouterr().err == ""  # the decoder's line is in the error, not beside it


def test_what_else_the_decoder_says_is_passed_on():
    said = []
    decode_pixels(encode(RGB, "PNG"), 3, said)
    assert said == []  # a sound image: nothing said, nothing lost


def test_a_multi_picture_jpeg_decodes_as_a_jpeg():
    """A camera's MPO file is JPEGs one after the other: its header passes staging, and it
    decodes as its first picture."""
    first, second = Image.fromarray(RGB), Image.fromarray(255 - RGB)
    payload = encode(first, "MPO", save_all=True, append_images=[second])
    assert Image.open(io.BytesIO(payload)).format == "MPO"
    assert image_info(payload) == (13, 21, 3)
    np.testing.assert_array_equal(  # the first picture, as a plain JPEG of it decodes
        decode_pixels(payload, 3), decode_pixels(encode(first, "JPEG"), 3)
    )


def test_gray_and_colour_are_converted_to_the_channels_asked():
    gray_png, rgb_png = encode(GRAY, "PNG"), encode(RGB, "PNG")
    as_rgb = decode_pixels(gray_png, 3)
    assert as_rgb.shape == (13, 21, 3)
    for channel in range(3):
        np.testing.assert_array_equal(as_rgb[:, :, channel], GRAY)
    np.testing.assert_array_equal(decode_pixels(gray_png, 1)[:, :, 0], GRAY)
    np.testing.assert_array_equal(decode_pixels(rgb_png, 3), RGB)  # RGB order, not BGR
    as_gray = decode_pixels(rgb_png, 1)
    assert as_gray.shape == (13, 21, 1)
    expected = np.asarray(Image.fromarray(RGB).convert("L")).astype(int)  # ITU-R 601 luma
    assert np.abs(as_gray[:, :, 0].astype(int) - expected).max() <= 1
    # JPEG: lossy, but close
    jpeg = decode_pixels(encode(GRAY, "JPEG", quality=95), 3)
    assert np.abs(jpeg[:, :, 1].astype(int) - GRAY).max() <= 12
    np.testing.assert_array_equal(jpeg[:, :, 0], jpeg[:, :, 2])
    # A palette or an alpha channel: the colours, not the palette indices; the alpha dropped
    palette = Image.fromarray(RGB).convert("P")
    np.testing.assert_array_equal(
        decode_pixels(encode(palette, "PNG"), 3), np.asarray(palette.convert("RGB"))
    )
    np.testing.assert_array_equal(
        decode_pixels(encode(Image.fromarray(RGB).convert("RGBA"), "PNG"), 3), RGB
    )
    with_alpha = Image.fromarray(GRAY).convert("LA")
    np.testing.assert_array_equal(decode_pixels(encode(with_alpha, "PNG"), 1)[:, :, 0], GRAY)


def test_a_16_bit_gray_png_keeps_its_top_8_bits():
    """Scaled to 8 bits, not clipped at 255 (which would make it white)."""
    deep = (np.arange(13 * 21, dtype=np.uint16).reshape(13, 21) * 240).astype(np.uint16)
    pixels = decode_pixels(encode(deep, "PNG"), 1)[:, :, 0]
    np.testing.assert_array_equal(pixels, (deep >> 8).astype(np.uint8))
    np.testing.assert_array_equal(decode_pixels(encode(deep, "PNG"), 3)[:, :, 2], deep >> 8)


def test_exif_orientation_is_ignored():
    """The pixels as stored, of the size the header gave staging: not turned by EXIF."""
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees
    payload = encode(RGB, "JPEG", exif=exif.tobytes())
    assert image_info(payload) == (13, 21, 3)
    assert decode_pixels(payload, 3).shape == (13, 21, 3)


def test_decode_into_cuts_resizes_and_mirrors():
    payload = encode(RGB, "PNG")
    # A box of the output's own size: those pixels exactly.
    out = np.zeros((5, 7, 3), np.uint8)
    decode_into(out, payload, 3, (4, 2, 11, 7), False)
    np.testing.assert_array_equal(out, RGB[2:7, 4:11])
    decode_into(out, payload, 3, (4, 2, 11, 7), True)
    np.testing.assert_array_equal(out, RGB[2:7, 4:11][:, ::-1])
    # Boxes are cut at whole pixels.
    decode_into(out, payload, 3, (4.2, 1.8, 10.9, 7.4), False)
    np.testing.assert_array_equal(out, RGB[2:7, 4:11])
    # Shrunk and enlarged: what OpenCV's area and bilinear resizing give.
    import cv2

    small = np.zeros((6, 10, 1), np.uint8)
    decode_into(small, encode(GRAY, "PNG"), 1, (0, 0, 21, 13), False)
    area = cv2.resize(GRAY, (10, 6), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(small[:, :, 0], area)
    large = np.zeros((20, 30, 3), np.uint8)
    decode_into(large, payload, 3, (1, 1, 15, 11), True)
    expected = cv2.resize(RGB[1:11, 1:15], (30, 20), interpolation=cv2.INTER_LINEAR)[:, ::-1]
    np.testing.assert_array_equal(large, expected)
    # Pixels differ from a shifted box.
    other = np.zeros((5, 7, 3), np.uint8)
    decode_into(other, payload, 3, (5, 2, 12, 7), False)
    assert not np.array_equal(other, out)


def test_a_box_under_one_pixel_is_one_pixel():
    """The centre box of an image one pixel high and of even width is under a pixel wide."""
    from dynalloc.data.augment import eval_boxes

    line = smooth(RNG, (1, 100, 3))
    [box] = eval_boxes([1], [100], 8, 8, 0.875)
    assert box[2] - box[0] < 1
    out = np.zeros((8, 8, 3), np.uint8)
    decode_into(out, encode(line), 3, box, False)
    np.testing.assert_array_equal(out, np.broadcast_to(line[0, 50], (8, 8, 3)))


def test_a_box_beyond_the_decoded_image_is_refused():
    """The image is smaller than its header said (a file replaced since staging)."""
    out = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(BadImage, match="decodes to 13x21 pixels, not the size its header"):
        decode_into(out, encode(RGB), 3, (0, 0, 30, 13), False)

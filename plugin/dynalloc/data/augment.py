"""Where each image is cropped and whether it is mirrored: numbers only, decided from (seed,
epoch, sample index) before any pixel is decoded.

The augmentation is the one Gluon's `RandomResizedCrop` and `RandomFlipLeftRight` (and
torchvision's) apply: a box of a random share of the area (`crop_scale`) and aspect ratio
(`crop_ratio`, drawn on a log scale), ten attempts to fit it, else the whole image with its
ratio clipped; a mirror with probability one half. Gluon's draw from one global random state,
so the pixels a sample gets would depend on which rank decoded it, in which order; here every
draw is a hash of (seed, epoch, index, draw number), so every policy, rank count and resumed
run sees the same pixels for the same sample. Evaluation cuts the centre `crop_fraction` of the
image after resizing its shorter side (ImageNet's 0.875: resize to 256, keep 224).
"""

import numpy as np

ATTEMPTS = 10
DRAWS = 2 * ATTEMPTS + 3  # area and ratio per attempt, then left, top and mirror
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x):
    """splitmix64's finaliser: a bijection of uint64 that scatters nearby inputs."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniforms(seed, epoch, indices, count):
    """(len(indices), count) floats in [0, 1) that depend only on (seed, epoch, index, column)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed, epoch], dtype=np.uint64) * _GOLDEN + _GOLDEN)
        base = _mix((key[0] ^ _mix(key[1] + np.asarray(indices, np.uint64))) * _GOLDEN)
        column = np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
        bits = _mix(base[:, None] ^ column[None, :])
    return (bits >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def train_boxes(seed, epoch, indices, heights, widths, crop_scale, crop_ratio, flip=True):
    """(boxes, mirrored): each sample's (left, top, right, bottom) crop in its own pixels and
    whether to mirror it, as RandomResizedCrop and RandomFlipLeftRight choose them."""
    u = uniforms(seed, epoch, indices, DRAWS)
    h = np.asarray(heights, np.float64)[:, None]
    w = np.asarray(widths, np.float64)[:, None]
    area = h * w * (crop_scale[0] + (crop_scale[1] - crop_scale[0]) * u[:, :ATTEMPTS])
    low, high = np.log(crop_ratio[0]), np.log(crop_ratio[1])
    ratio = np.exp(low + (high - low) * u[:, ATTEMPTS : 2 * ATTEMPTS])
    crop_w = np.round(np.sqrt(area * ratio))
    crop_h = np.round(np.sqrt(area / ratio))
    fits = (crop_w >= 1) & (crop_h >= 1) & (crop_w <= w) & (crop_h <= h)
    first = np.argmax(fits, axis=1)
    rows = np.arange(len(first))
    found = fits[rows, first]
    cw, ch = crop_w[rows, first], crop_h[rows, first]
    h, w = h[:, 0], w[:, 0]
    # None of the attempts fit: the whole image, its aspect ratio clipped into crop_ratio.
    own = w / h
    whole_w = np.where(own > crop_ratio[1], np.round(h * crop_ratio[1]), w)
    whole_h = np.where(own < crop_ratio[0], np.round(w / crop_ratio[0]), h)
    cw, ch = np.where(found, cw, whole_w), np.where(found, ch, whole_h)
    left = np.where(found, np.floor(u[:, -3] * (w - cw + 1)), (w - cw) // 2)
    top = np.where(found, np.floor(u[:, -2] * (h - ch + 1)), (h - ch) // 2)
    boxes = np.stack([left, top, left + cw, top + ch], axis=1)
    mirrored = (u[:, -1] < 0.5) if flip else np.zeros(len(rows), bool)
    return boxes, mirrored


def eval_boxes(heights, widths, out_height, out_width, crop_fraction):
    """Each image's centre box that, resized to (out_height, out_width), equals resizing its
    shorter side to out / crop_fraction and cutting the centre out of that."""
    h = np.asarray(heights, np.float64)
    w = np.asarray(widths, np.float64)
    # The resize scales the shorter side (relative to the output's) to 1 / crop_fraction.
    scale = np.minimum(h / out_height, w / out_width) * crop_fraction
    box_h, box_w = out_height * scale, out_width * scale
    top, left = (h - box_h) / 2, (w - box_w) / 2
    return np.stack([left, top, left + box_w, top + box_h], axis=1)


def normalise(images, mean, std):
    """(N, H, W, C) uint8 -> (N, C, H, W) float32, (pixel - mean) / std per channel."""
    x = np.asarray(images, dtype=np.float32)
    x -= np.asarray(mean, np.float32)
    x /= np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))

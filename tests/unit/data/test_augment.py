"""`dynalloc.data.augment`: the crop boxes and mirrors of the training images, drawn from
(seed, epoch, index) hashes, against a per-sample transcription of torchvision's
`RandomResizedCrop.get_params`; the centred evaluation boxes; the normalisation."""

import math

import numpy as np
import pytest
from dynalloc.data.augment import (
    ATTEMPTS,
    DRAWS,
    eval_boxes,
    normalise,
    train_boxes,
    uniforms,
)

SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)


def reference_get_params(height, width, scale, ratio, u):
    """torchvision's RandomResizedCrop.get_params, line for line, one sample, with its random
    draws taken from `u` in augment's order (area and ratio of each attempt, then left, top):
    (left, top, right, bottom) and whether one of the attempts fitted."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for attempt in range(ATTEMPTS):
        target_area = area * (scale[0] + (scale[1] - scale[0]) * u[attempt])
        log_aspect = log_ratio[0] + (log_ratio[1] - log_ratio[0]) * u[ATTEMPTS + attempt]
        aspect_ratio = math.exp(log_aspect)
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = int(u[-2] * (height - h + 1))  # torch.randint(0, height - h + 1)
            j = int(u[-3] * (width - w + 1))
            return (j, i, j + w, i + h), True
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    i = (height - h) // 2
    j = (width - w) // 2
    return (j, i, j + w, i + h), False


def mixed_sizes(n, rng):
    """Image sizes from tiny and thin (where the attempts fail) to large."""
    heights = rng.integers(1, 400, n)
    widths = np.where(rng.random(n) < 0.2, rng.integers(1, 8, n), rng.integers(1, 400, n))
    return heights, widths


# ---- uniforms -------------------------------------------------------------------------------


def test_uniforms_depend_only_on_seed_epoch_and_index():
    a = uniforms(3, 1, [3, 7, 9], DRAWS)
    assert a.shape == (3, DRAWS) and a.dtype == np.float64
    np.testing.assert_array_equal(uniforms(3, 1, [7], DRAWS)[0], a[1])  # alone or in a batch
    np.testing.assert_array_equal(uniforms(3, 1, [9, 7, 3], DRAWS), a[::-1])
    np.testing.assert_array_equal(uniforms(3, 1, np.array([3, 7, 9]), DRAWS), a)
    np.testing.assert_array_equal(uniforms(3, 1, [7], 5)[0], a[1, :5])  # columns are fixed too
    for other in (uniforms(4, 1, [3, 7, 9], DRAWS), uniforms(3, 2, [3, 7, 9], DRAWS)):
        assert not np.isclose(other, a).any()  # another seed or epoch: other draws


def test_uniforms_look_uniform_and_independent():
    u = uniforms(0, 0, np.arange(20000), 4)
    assert ((u >= 0) & (u < 1)).all()
    assert len(np.unique(u)) == u.size
    counts = np.histogram(u[:, 0], bins=10, range=(0, 1))[0]
    assert (np.abs(counts - 2000) < 200).all(), counts  # about 7 standard deviations
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.03
    assert abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 0.03  # neighbouring indices
    epochs = uniforms(0, 1, np.arange(20000), 1)[:, 0]
    assert abs(np.corrcoef(u[:, 0], epochs)[0, 1]) < 0.03
    seeds = uniforms(1, 0, np.arange(20000), 1)[:, 0]
    assert abs(np.corrcoef(u[:, 0], seeds)[0, 1]) < 0.03


# ---- training boxes ------------------------------------------------------------------------


def test_train_boxes_are_torchvisions_get_params_with_the_same_draws():
    rng = np.random.default_rng(1)
    heights, widths = mixed_sizes(3000, rng)
    indices = rng.permutation(100000)[:3000]
    for scale, ratio in ((SCALE, RATIO), ((0.5, 1.0), (0.2, 5.0)), ((1.0, 1.0), (1.0, 1.0))):
        boxes, mirrored = train_boxes(7, 2, indices, heights, widths, scale, ratio)
        u = uniforms(7, 2, indices, DRAWS)
        found = 0
        for k in range(len(indices)):
            box, fitted = reference_get_params(int(heights[k]), int(widths[k]), scale, ratio, u[k])
            assert tuple(boxes[k]) == box, (k, heights[k], widths[k])
            found += fitted
        assert 0 < found < len(indices)  # both branches were taken
        np.testing.assert_array_equal(mirrored, u[:, -1] < 0.5)


def test_train_boxes_do_not_depend_on_the_rest_of_the_batch():
    boxes, flips = train_boxes(5, 3, [3, 7, 9], [50, 60, 70], [80, 90, 100], SCALE, RATIO)
    alone, flip = train_boxes(5, 3, [7], [60], [90], SCALE, RATIO)
    np.testing.assert_array_equal(alone[0], boxes[1])
    assert flip[0] == flips[1]
    other_epoch, _ = train_boxes(5, 4, [3, 7, 9], [50, 60, 70], [80, 90, 100], SCALE, RATIO)
    assert not np.array_equal(other_epoch, boxes)


def test_boxes_lie_inside_their_images_with_the_area_and_ratio_asked():
    rng = np.random.default_rng(2)
    n = 5000
    heights, widths = rng.integers(200, 500, n), rng.integers(200, 500, n)
    boxes, _ = train_boxes(0, 0, np.arange(n), heights, widths, SCALE, RATIO)
    left, top, right, bottom = boxes.T
    assert (boxes == np.round(boxes)).all()  # whole pixels
    assert (left >= 0).all() and (top >= 0).all()
    assert (right <= widths).all() and (bottom <= heights).all()
    cw, ch = right - left, bottom - top
    assert (cw >= 1).all() and (ch >= 1).all()
    # Every one fits at some attempt at these sizes; rounding moves a side by half a pixel.
    area = heights * widths
    assert ((cw + 0.5) * (ch + 0.5) >= SCALE[0] * area).all()
    assert ((cw - 0.5) * (ch - 0.5) <= SCALE[1] * area).all()
    assert ((cw + 0.5) / (ch - 0.5) >= RATIO[0]).all()
    assert ((cw - 0.5) / (ch + 0.5) <= RATIO[1]).all()
    # The box's place is uniform over where it fits: its relative offset averages one half.
    free_x, free_y = widths - cw, heights - ch
    roomy = (free_x > 50) & (free_y > 50)
    assert abs((left[roomy] / free_x[roomy]).mean() - 0.5) < 0.03
    assert abs((top[roomy] / free_y[roomy]).mean() - 0.5) < 0.03


def test_when_no_attempt_fits_the_whole_image_is_taken_its_ratio_clipped():
    # 100 x 1000 pixels: half the area or more at a ratio <= 4/3 is taller than 100.
    boxes, _ = train_boxes(0, 0, np.arange(50), [100] * 50, [1000] * 50, (0.5, 1.0), RATIO)
    width = round(100 * 4 / 3)
    expected = [(1000 - width) // 2, 0, (1000 - width) // 2 + width, 100]
    assert (boxes == expected).all()
    # ... and tall ones: the height clipped to width / 3 * 4.
    boxes, _ = train_boxes(0, 0, np.arange(50), [1000] * 50, [100] * 50, (0.5, 1.0), RATIO)
    height = round(100 / 0.75)
    assert (boxes == [0, (1000 - height) // 2, 100, (1000 - height) // 2 + height]).all()
    # A 1 x 1 image: all of it.
    boxes, _ = train_boxes(0, 0, [0, 1], [1, 1], [1, 1], SCALE, RATIO)
    assert (boxes == [0, 0, 1, 1]).all()


def test_about_half_are_mirrored_and_none_without_flip():
    n = 4000
    _, mirrored = train_boxes(1, 0, np.arange(n), [32] * n, [32] * n, SCALE, RATIO)
    assert abs(mirrored.mean() - 0.5) < 0.04  # five standard deviations
    _, epoch_1 = train_boxes(1, 1, np.arange(n), [32] * n, [32] * n, SCALE, RATIO)
    assert 0.4 < (mirrored == epoch_1).mean() < 0.6  # another epoch mirrors others
    _, never = train_boxes(1, 0, np.arange(n), [32] * n, [32] * n, SCALE, RATIO, flip=False)
    assert not never.any()


def test_the_hashed_draws_crop_as_torchvisions_random_draws_do():
    """The statistics of the boxes from the hashes match those of the reference fed by a real
    random generator: the hashes are as good as random draws for the augmentation."""
    rng = np.random.default_rng(3)
    n = 6000
    heights, widths = rng.integers(20, 300, n), rng.integers(20, 300, n)
    ours, _ = train_boxes(11, 0, np.arange(n), heights, widths, SCALE, RATIO)
    theirs, fitted = [], []
    for h, w, u in zip(heights, widths, rng.random((n, DRAWS)), strict=True):
        box, fit = reference_get_params(int(h), int(w), SCALE, RATIO, u)
        theirs.append(box)
        fitted.append(fit)
    theirs = np.asarray(theirs, np.float64)

    def stats(boxes):
        cw, ch = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        share = cw * ch / (heights * widths)
        return {
            "share": share.mean(),
            "log ratio": np.log(cw / ch).mean(),
            "log ratio spread": np.log(cw / ch).std(),
            "left": (boxes[:, 0] / np.maximum(widths - cw, 1)).mean(),
            "top": (boxes[:, 1] / np.maximum(heights - ch, 1)).mean(),
            "whole": ((cw == widths) & (ch == heights)).mean(),
        }

    a, b = stats(ours), stats(theirs)
    for key in a:
        assert abs(a[key] - b[key]) < 0.03, (key, a[key], b[key])
    assert 0.3 < a["share"] < 0.7 and 0 < np.mean(fitted) <= 1


# ---- evaluation boxes ------------------------------------------------------------------------


def test_eval_boxes_are_the_centre_of_the_resized_shorter_side():
    boxes = eval_boxes([256, 320, 100], [320, 256, 100], 224, 224, 0.875)
    # 256 x 320 resized to 256 / 0.875 ... = 224 / 0.875: the centre 224 of that is the
    # centre 0.875 x 256 of the original.
    np.testing.assert_allclose(boxes[0], [48, 16, 272, 240])
    np.testing.assert_allclose(boxes[1], [16, 48, 240, 272])
    np.testing.assert_allclose(boxes[2], [6.25, 6.25, 93.75, 93.75])


def test_eval_boxes_are_centred_inside_and_of_the_outputs_ratio():
    rng = np.random.default_rng(4)
    heights, widths = rng.integers(1, 500, 1000), rng.integers(1, 500, 1000)
    for out_h, out_w, crop in ((224, 224, 0.875), (24, 32, 1.0), (7, 5, 0.5)):
        boxes = eval_boxes(heights, widths, out_h, out_w, crop)
        left, top, right, bottom = boxes.T
        np.testing.assert_allclose((left + right) / 2, widths / 2)
        np.testing.assert_allclose((top + bottom) / 2, heights / 2)
        assert (left >= 0).all() and (top >= 0).all()
        assert (right <= widths + 1e-9).all() and (bottom <= heights + 1e-9).all()
        np.testing.assert_allclose((right - left) / (bottom - top), out_w / out_h)
        # The box's tighter side is `crop` of the image's.
        tight = np.maximum((right - left) / widths, (bottom - top) / heights)
        np.testing.assert_allclose(tight, crop)


# ---- normalisation ------------------------------------------------------------------------


def test_normalise_is_per_channel_and_channels_first():
    images = np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3)
    x = normalise(images, [1.0, 2.0, 3.0], [2.0, 4.0, 8.0])
    assert x.shape == (2, 3, 3, 4) and x.dtype == np.float32 and x.flags.c_contiguous
    for c, (m, s) in enumerate(((1, 2), (2, 4), (3, 8))):
        np.testing.assert_allclose(x[:, c], (images[..., c].astype(np.float32) - m) / s)
    gray = normalise(images[..., :1], [10.0], [5.0])
    assert gray.shape == (2, 1, 3, 4)
    np.testing.assert_allclose(gray[:, 0], (images[..., 0] - 10.0) / 5.0)


@pytest.mark.parametrize("seed", [0, 2**40])
def test_large_seeds_and_epochs_are_fine(seed):
    u = uniforms(seed, 10**6, [0, 2**33], DRAWS)
    assert ((u >= 0) & (u < 1)).all() and not np.array_equal(u[0], u[1])

"""The `stream` section of a run config: how the ranks read a streamed dataset (`recordio`,
`images`): the input size, the augmentation, the normalisation, the decode pool, and what a bad
record does. Checked like every other key: one line naming the key, before anything is made."""

import math
import numbers

from dynalloc.errors import DynallocError

STREAM_DEFAULTS = {
    "input_size": None,  # [height, width] or one number; null: the images' own, if all one size
    "crop_scale": None,  # training: random resized crop of this share of the area; null: by size
    "crop_ratio": [0.75, 4 / 3],  # ... and of this aspect ratio (width / height)
    "flip": True,  # training: mirror half the images
    "eval_crop": 0.875,  # evaluation: resize the shorter side to input / eval_crop, cut the centre
    "mean": None,  # per channel, pixels 0-255; null: the manifest's estimate
    "std": None,
    "decode_workers": None,  # decode threads per rank; null: one less than its cores, at least 1
    "on_bad_record": "stop",  # or skip: replace it by the next good image, counted and logged
}
BAD_RECORD = ("stop", "skip")
# The default crop scale: Gluon's and torchvision's [0.08, 1] is made for ImageNet's images
# (a crop of 8% of 256x256 still has 72 pixels a side); of a 24x24 digit it would keep 7 pixels a
# side. Images whose shorter side is under SMALL_IMAGE pixels keep at least 75% of their area,
# about what the usual 4-pixel pad and crop of CIFAR's 32x32 keeps.
SMALL_IMAGE = 64
CROP_SCALE = {"large": [0.08, 1.0], "small": [0.75, 1.0]}


def default_crop_scale(shorter_side):
    """The crop scale a dataset gets when `stream.crop_scale` is not set: by the shorter side
    of its smallest image."""
    return list(CROP_SCALE["small" if shorter_side < SMALL_IMAGE else "large"])


def check_stream(section):
    """The section with its defaults filled in, or DynallocError naming the bad key."""
    if not isinstance(section, dict):
        raise DynallocError(f"config key 'stream' must be a mapping, got {section!r}")
    unknown = sorted(set(section) - set(STREAM_DEFAULTS))
    if unknown:
        raise DynallocError(
            f"unknown key 'stream.{unknown[0]}'; known: {', '.join(STREAM_DEFAULTS)}"
        )
    stream = {**STREAM_DEFAULTS, **section}
    size = stream["input_size"]
    if size is not None:
        size = [size, size] if _number(size) else size
        if not (isinstance(size, list) and len(size) == 2 and all(_whole(v, 1) for v in size)):
            raise DynallocError(
                f"config key 'stream.input_size' must be [height, width] or one integer >= 1, "
                f"got {stream['input_size']!r}"
            )
        stream["input_size"] = [int(v) for v in size]
    for key, low, high in (("crop_scale", 0, 1), ("crop_ratio", 0, math.inf)):
        pair = stream[key]
        if pair is None and key == "crop_scale":  # by the images' size, once they are known
            continue
        if not (
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and all(_number(v) for v in pair)
            and low < pair[0] <= pair[1] <= high
        ):
            raise DynallocError(
                f"config key 'stream.{key}' must be [low, high] with {low} < low <= high"
                f"{' <= 1' if high == 1 else ''}, got {pair!r}"
            )
        stream[key] = [float(v) for v in pair]
    if not isinstance(stream["flip"], bool):
        raise DynallocError(
            f"config key 'stream.flip' must be true or false, got {stream['flip']!r}"
        )
    crop = stream["eval_crop"]
    if not (_number(crop) and 0 < crop <= 1):
        raise DynallocError(f"config key 'stream.eval_crop' must be in (0, 1], got {crop!r}")
    for key in ("mean", "std"):
        values = stream[key]
        if values is None:
            continue
        values = [values] if _number(values) else values
        if not (isinstance(values, list) and values and all(_number(v) for v in values)) or (
            key == "std" and not all(v > 0 for v in values)
        ):
            raise DynallocError(
                f"config key 'stream.{key}' must be a number or one per channel"
                f"{' (each > 0)' if key == 'std' else ''}, got {stream[key]!r}"
            )
        stream[key] = [float(v) for v in values]
    workers = stream["decode_workers"]
    if workers is not None and not _whole(workers, 0):
        raise DynallocError(
            f"config key 'stream.decode_workers' must be an integer >= 0 or null, got {workers!r}"
        )
    if stream["on_bad_record"] not in BAD_RECORD:
        raise DynallocError(
            f"config key 'stream.on_bad_record' must be stop or skip, got "
            f"{stream['on_bad_record']!r}"
        )
    return stream


def _number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value, minimum):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

"""The run config's `stream` section, by `dynalloc.experiment.stream_config.check_stream` and
in a whole run config by `resolve`: its defaults and normal forms, and one DynallocError naming
`stream.KEY` for every bad value."""

import copy
import math

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import DEFAULTS, resolve
from dynalloc.experiment.stream_config import STREAM_DEFAULTS, check_stream, default_crop_scale
from run_configs import base, fails


def test_an_empty_section_is_the_defaults():
    before = copy.deepcopy(STREAM_DEFAULTS)
    stream = check_stream({})
    assert stream == STREAM_DEFAULTS
    stream["crop_ratio"][0] = 0.5
    assert before == STREAM_DEFAULTS  # a copy, not the defaults themselves


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"input_size": 32}, {"input_size": [32, 32]}),
        ({"input_size": [24, 32]}, {"input_size": [24, 32]}),
        ({"input_size": None}, {"input_size": None}),
        ({"crop_scale": [1, 1]}, {"crop_scale": [1.0, 1.0]}),
        ({"crop_scale": (0.5, 0.75)}, {"crop_scale": [0.5, 0.75]}),
        ({"crop_ratio": [1, 2]}, {"crop_ratio": [1.0, 2.0]}),
        ({"flip": False}, {"flip": False}),
        ({"eval_crop": 1}, {"eval_crop": 1}),
        ({"mean": 120}, {"mean": [120.0]}),
        ({"mean": [1, 2.5, -3]}, {"mean": [1.0, 2.5, -3.0]}),
        ({"std": [60, 61, 62]}, {"std": [60.0, 61.0, 62.0]}),
        ({"decode_workers": 0}, {"decode_workers": 0}),
        ({"decode_workers": 3}, {"decode_workers": 3}),
        ({"on_bad_record": "skip"}, {"on_bad_record": "skip"}),
    ],
    ids=lambda v: str(v),
)
def test_good_values_are_kept_in_their_normal_form(section, expected):
    stream = check_stream(section)
    for key, value in expected.items():
        assert stream[key] == value and type(stream[key]) is type(value), key
    for key in set(STREAM_DEFAULTS) - set(expected):
        assert stream[key] == STREAM_DEFAULTS[key], key


NAN, INF = float("nan"), math.inf
BAD = {
    "input_size": [0, -1, 2.5, "32", True, [32], [32, 32, 3], [32, 0], [32.0, 32], {"h": 3}, NAN],
    "crop_scale": [
        0.5,
        [0.5],
        [0, 1],
        [0.5, 1.5],
        [0.8, 0.5],
        [-0.1, 0.5],
        ["0.1", 1],
        [True, 1],
        [0.1, NAN],
        "0.08,1",
    ],
    "crop_ratio": [[0, 1], [2, 1], [1, INF], [-1, 1], [1], 1.0, [1, "2"], None, [NAN, 1]],
    "flip": ["yes", 1, 0, None, "true"],
    "eval_crop": [0, -0.5, 1.5, "0.875", True, None, NAN, [0.875]],
    "mean": [[], "120", [1, "2"], True, [True], NAN, [1, INF], {"r": 1}],
    "std": [0, -1, [], [1, 0], [1, -2, 3], "60", True, NAN, [INF]],
    "decode_workers": [-1, 1.5, "2", True, [2], 2.0],
    "on_bad_record": ["ignore", "Stop", None, True, ["skip"], ""],
}
CASES = [(key, value) for key, values in BAD.items() for value in values]


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_every_bad_value_names_its_key(key, value):
    with pytest.raises(DynallocError) as caught:
        check_stream({key: value})
    message = str(caught.value)
    assert f"'stream.{key}'" in message, message
    assert message.count("\n") == 0


def test_every_key_has_bad_values_here():
    assert set(BAD) == set(STREAM_DEFAULTS)


def test_an_unknown_key_is_named_with_the_known_ones():
    with pytest.raises(DynallocError, match=r"unknown key 'stream\.crop_size'; known: input_siz"):
        check_stream({"crop_size": 3, "flip": True})


@pytest.mark.parametrize("section", [None, [], "crop", 3])
def test_the_section_must_be_a_mapping(section):
    with pytest.raises(DynallocError, match="config key 'stream' must be a mapping"):
        check_stream(section)


def test_the_section_itself_is_left_alone():
    section = {"input_size": 8, "mean": 3}
    check_stream(section)
    assert section == {"input_size": 8, "mean": 3}


def test_small_images_are_not_cropped_to_a_few_pixels_by_default():
    """Left out, the crop scale follows the images: ImageNet's [0.08, 1] from 64 pixels on the
    shorter side; a 24x24 digit keeps at least 75% of its area (8% would be 7x7 pixels)."""
    assert check_stream({})["crop_scale"] is None  # resolved once the dataset is open
    assert default_crop_scale(24) == [0.75, 1.0] and default_crop_scale(63) == [0.75, 1.0]
    assert default_crop_scale(64) == [0.08, 1.0] and default_crop_scale(256) == [0.08, 1.0]


# ---- the section in a whole run config, through resolve ----------------------------------


def test_stream_defaults_are_filled_and_given_values_normalised():
    assert resolve(base(), 2)["stream"] == DEFAULTS["stream"]
    stream = resolve(base(stream={"input_size": 24, "mean": 100, "on_bad_record": "skip"}), 2)
    assert stream["stream"]["input_size"] == [24, 24]
    assert stream["stream"]["mean"] == [100.0] and stream["stream"]["on_bad_record"] == "skip"
    assert stream["stream"]["crop_scale"] == DEFAULTS["stream"]["crop_scale"]


@pytest.mark.parametrize(
    ("stream", "fragment"),
    [
        ({"input_size": 0}, "stream.input_size"),
        ({"crop_scale": [0.5, 2]}, "stream.crop_scale"),
        ({"crop_ratio": [2, 1]}, "stream.crop_ratio"),
        ({"flip": "yes"}, "stream.flip"),
        ({"eval_crop": 0}, "stream.eval_crop"),
        ({"mean": "x"}, "stream.mean"),
        ({"std": [1, 0]}, "stream.std"),
        ({"decode_workers": -1}, "stream.decode_workers"),
        ({"on_bad_record": "ignore"}, "stream.on_bad_record"),
        ({"inputsize": 3}, "stream.inputsize"),
        ([1, 2], "'stream'"),
    ],
)
def test_bad_stream_values_name_the_key(stream, fragment):
    fails(base(stream=stream), fragment)


def test_a_resolved_config_with_a_stream_section_resolves_again():
    config = resolve(base(stream={"input_size": [8, 12], "std": 50}), 2)
    assert resolve(config, 2)["stream"] == config["stream"]

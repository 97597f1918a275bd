"""Checkpoint files: round trip, detection of damage, pruning, the resume rules, and telling a
policy state pickled by another version."""

import errno
import os
import pickle

import numpy as np
import pytest
from dynalloc.core.policies import POLICIES, make_policy
from dynalloc.errors import DynallocError
from dynalloc.runtime.common import checkpoint

CONFIG = {"dataset": "/d", "model": "lenet", "global_batch": 512, "seed": 0, "epochs": 2}


def payload(iteration):
    return {"iteration": iteration, "params": {"w": np.arange(6.0).reshape(2, 3) + iteration}}


def test_round_trip_keeps_every_value(tmp_path):
    path = checkpoint.write(tmp_path, 7, payload(7), keep=2)
    assert path == tmp_path / "checkpoints" / "iteration-00000007.ckpt"
    back = checkpoint.read(path)
    assert back["iteration"] == 7
    np.testing.assert_array_equal(back["params"]["w"], payload(7)["params"]["w"])
    assert [p.name for p in tmp_path.joinpath("checkpoints").iterdir()] == [path.name]


def test_only_the_newest_keep_remain(tmp_path):
    for iteration in (5, 10, 15, 20):
        checkpoint.write(tmp_path, iteration, payload(iteration), keep=2)
    assert [p.name for p in checkpoint.existing(tmp_path)] == [
        "iteration-00000020.ckpt",
        "iteration-00000015.ckpt",
    ]


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_damaged_newest_is_reported_and_the_previous_used(tmp_path, damage):
    checkpoint.write(tmp_path, 5, payload(5), keep=3)
    newest = checkpoint.write(tmp_path, 10, payload(10), keep=3)
    data = newest.read_bytes()
    if damage == "truncate":
        newest.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        newest.write_bytes(data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:])
    else:
        newest.write_bytes(b"something else entirely\n" + data)
    warnings = []
    path, back = checkpoint.newest_valid(tmp_path, warnings.append)
    assert back["iteration"] == 5 and path.name == "iteration-00000005.ckpt"
    assert len(warnings) == 1 and newest.name in warnings[0], warnings


def test_no_checkpoint_means_a_fresh_start(tmp_path):
    assert checkpoint.newest_valid(tmp_path, print) is None


def test_all_damaged_is_an_error_not_a_silent_fresh_start(tmp_path):
    path = checkpoint.write(tmp_path, 5, payload(5), keep=3)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DynallocError, match="no usable checkpoint .* delete that directory"):
        checkpoint.newest_valid(tmp_path, lambda message: None)


def test_failed_write_keeps_the_previous_and_names_the_file(tmp_path, monkeypatch):
    checkpoint.write(tmp_path, 5, payload(5), keep=1)

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(DynallocError, match=r"iteration-00000010.ckpt: No space .*; kept .*05"):
        checkpoint.write(tmp_path, 10, payload(10), keep=1)
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["iteration-00000005.ckpt"]


@pytest.mark.parametrize("key", ["model", "global_batch", "dataset", "epochs"])
def test_resume_refuses_another_run(key):
    other = {**CONFIG, key: "changed"}
    with pytest.raises(DynallocError, match=f"belongs to a run with {key}"):
        checkpoint.check_resumable("ck", CONFIG, other)


def test_resume_allows_another_policy_or_rank_count():
    changed = {**CONFIG, "policy": {"name": "static"}, "ranks": 3, "scenario": {}}
    checkpoint.check_resumable(
        "ck", {**CONFIG, "policy": {"name": "adaptive"}, "ranks": 2}, changed
    )


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_policy_keeps_its_layout_through_a_checkpoint_and_updates(name):
    speeds = {"speeds": [1.0, 1.0, 1.0, 0.25]} if name == "oracle" else {}
    fresh, used = (make_policy({"name": name, **speeds}, 4, 512) for _ in range(2))
    shares = used.shares
    for iteration, times in enumerate([[0.1, 0.1, 0.1, 0.4], [0.1, 0.1, 0.3, 0.1]] * 3):
        shares = used.update(shares, times, iteration + 1, 0)
    assert checkpoint.layout(pickle.loads(pickle.dumps(used))) == checkpoint.layout(fresh)


def test_a_policy_pickled_by_another_version_is_told_by_its_layout():
    """A checkpoint of an older adaptive, whose cost models had no drift detector and which
    had no warm-up flag: it unpickles, and would fail at its first update."""
    old = make_policy("adaptive", 2, 64)
    del old.warm_up
    assert checkpoint.layout(old) != checkpoint.layout(make_policy("adaptive", 2, 64))
    old = make_policy("adaptive", 2, 64)
    del old.models.drifting
    assert checkpoint.layout(old) != checkpoint.layout(make_policy("adaptive", 2, 64))

"""Checkpoint files: round trip, detection of damage, pruning, the resume rules, a policy's
state as plain data and telling another version's; a checkpoint loads as data, never as code."""

import errno
import hashlib
import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from dynalloc.core.policies import POLICIES, make_policy
from dynalloc.core.state import export, restore, same_layout
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
def test_a_policy_goes_on_from_its_state_in_a_checkpoint(tmp_path, name):
    speeds = {"speeds": [1.0, 1.0, 1.0, 0.25]} if name == "oracle" else {}
    fresh, used = (make_policy({"name": name, **speeds}, 4, 512) for _ in range(2))
    shares = used.shares
    times = [[0.1, 0.1, 0.1, 0.4], [0.1, 0.1, 0.3, 0.1]] * 3
    for iteration, seconds in enumerate(times):
        shares = used.update(shares, seconds, iteration + 1, 0)
    path = checkpoint.write(tmp_path, 6, {"policy": export(used)}, keep=1)
    saved = checkpoint.read(path)["policy"]
    assert same_layout(fresh, saved)
    restore(fresh, saved)
    for iteration, seconds in enumerate(times, start=len(times)):  # both go on alike
        assert (
            used.update(shares, seconds, iteration, 0).tolist()
            == fresh.update(shares, seconds, iteration, 0).tolist()
        )


def test_adaptive_goes_on_from_a_checkpoint_taken_between_a_spike_and_its_return(tmp_path):
    """The state `adaptive` keeps to forget a spike is plain data in the checkpoint too."""
    fresh, used = (make_policy("adaptive", 2, 512) for _ in range(2))
    shares = used.shares
    for iteration, seconds in enumerate([[0.1, 0.1]] * 8 + [[0.1, 0.3]]):
        shares = used.update(shares, seconds, iteration + 1, 0)
    assert used.before_jump is not None and shares[0] > 256  # the spike moved the split
    path = checkpoint.write(tmp_path, 9, {"policy": export(used)}, keep=1)
    restore(fresh, checkpoint.read(path)["policy"])
    for iteration in range(10, 15):
        seconds = shares * 0.1 / 256
        assert (used.update(shares, seconds, iteration, 0).tolist()
                == (shares := fresh.update(shares, seconds, iteration, 0)).tolist())  # fmt: skip
    assert fresh.spiky and shares.tolist() == [256, 256]


def test_a_policy_state_of_another_version_is_told_by_its_layout():
    """The state of an older adaptive, whose cost models had no drift detector and which had
    no warm-up flag: assigned, it would fail at its first update."""
    old = make_policy("adaptive", 2, 64)
    del old.warm_up
    assert not same_layout(make_policy("adaptive", 2, 64), export(old))
    old = make_policy("adaptive", 2, 64)
    del old.models.drifting
    assert not same_layout(make_policy("adaptive", 2, 64), export(old))


class Payload:
    """What a pickle can make its reader do: create `path` (a stand-in for any code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_checkpoint_of_the_pickled_format_is_refused_and_not_run(tmp_path):
    ran = tmp_path / "code-ran"
    body = pickle.dumps({"iteration": 3, "policy": Payload(ran)})
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    path = folder / "iteration-00000003.ckpt"
    path.write_bytes(checkpoint.PICKLED + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    with pytest.raises(DynallocError, match=r"pickled format, which runs code .*dynalloc conv"):
        checkpoint.newest_valid(tmp_path, print)
    assert not ran.exists()


def test_arrays_that_would_unpickle_are_refused_and_not_run(tmp_path):
    """An .npz can hold an object array, a pickle inside: a checkpoint holding one is refused
    without loading it."""
    ran = tmp_path / "code-ran"
    buffer = io.BytesIO()
    np.savez(buffer, document=np.frombuffer(b"{}", np.uint8),
             a0=np.array([Payload(ran)], dtype=object))  # fmt: skip
    body = buffer.getvalue()
    path = tmp_path / "iteration-00000001.ckpt"
    path.write_bytes(checkpoint.MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    with pytest.raises(DynallocError, match="holds no plain data"):
        checkpoint.read(path)
    assert not ran.exists()

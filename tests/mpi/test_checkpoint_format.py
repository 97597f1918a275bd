"""A checkpoint of the first, pickled format on real runs: resuming refuses it in one line,
without loading it; `dynalloc convert-checkpoint` rewrites one the user trusts as data, and the
run then resumes from it to the very parameters of the run never interrupted."""

import hashlib
import pickle
import shutil

import numpy as np
import pytest
import yaml
from dynalloc.core.policies import make_policy
from dynalloc.core.state import restore
from dynalloc.runtime.common import checkpoint
from helpers import dynalloc, parameters

pytestmark = pytest.mark.mpi


def old_format(path, config_path):
    """The checkpoint `path` rewritten as the first format wrote it: a pickle, the policy as its
    object and the optimizer state as MXNet's `trainer.save_states` bytes."""
    from dynalloc.runtime.common.prepare import prepare
    from dynalloc.runtime.mxnet.backend import Backend
    from dynalloc.runtime.mxnet.build import build

    payload = checkpoint.read(path)
    config = payload["config"]
    policy = make_policy(config["policy"], config["ranks"], config["global_batch"])
    restore(policy, payload["policy"])
    net, trainer = build(prepare(config_path, 0, 1))
    Backend().restore_model(net, trainer, None, payload["params"], payload["trainer"])
    states = path.with_suffix(".states")
    trainer.save_states(str(states))
    old = {**payload, "policy": policy, "trainer": states.read_bytes()}
    body = pickle.dumps(old)
    digest = hashlib.sha256(body).hexdigest().encode()
    path.write_bytes(checkpoint.PICKLED + digest + b"\n" + body)


def test_a_pickled_checkpoint_is_refused_and_converted_resumes_exactly(digits, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "dataset": str(digits), "model": "mlp", "global_batch": 64, "iterations": 12,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9,
                      "schedule": {"name": "step", "every": 3, "factor": 0.5}},
        "policy": {"name": "adaptive"}, "checkpoint": {"every": 4, "keep": 3}, "seed": 3,
    }))  # fmt: skip
    whole = tmp_path / "whole"
    assert dynalloc("train", "--config", config, "--out", whole).returncode == 0
    cut = tmp_path / "cut"  # the same run as if stopped after its 4th iteration
    shutil.copytree(whole, cut)
    for path in [*cut.iterdir(), *(cut / "checkpoints").iterdir()]:
        if path.is_file() and path.name not in ("config.yaml", "iteration-00000004.ckpt"):
            path.unlink()
    pickled = cut / "checkpoints" / "iteration-00000004.ckpt"
    old_format(pickled, config)

    refused = dynalloc("train", "--config", config, "--out", cut)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "pickled format, which runs code when it is loaded" in refused.stderr
    assert f"dynalloc convert-checkpoint {pickled}" in refused.stderr

    converted = dynalloc("convert-checkpoint", pickled)
    assert converted.returncode == 0, converted.stderr
    assert pickled.read_bytes().startswith(checkpoint.MAGIC)
    resumed = dynalloc("train", "--config", config, "--out", cut)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in (cut / "train.log").read_text()
    expected, got = parameters(whole), parameters(cut)
    assert max(float(np.abs(expected[k] - got[k]).max()) for k in expected) == 0.0

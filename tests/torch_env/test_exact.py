"""`dynalloc.runtime.torch`: the same model whatever the ranks, the shares and the launcher;
every sample once per epoch; bad input said in one line; a killed rank ends the job."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from launchers import BIN, ENV, HERE, mpiexec, torchrun

# Rank 1 three times slower: `adaptive` moves the shares, and the model must not notice.
SLOW = ["--slow", "1=3"]


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    result = torchrun(1, "loop.py", out)
    assert result.returncode == 0, result.stderr
    return np.load(f"{out}.params.npy")


def trains_the_model_of_one_rank(one_rank, tmp_path, ranks, *options):
    """loop.py on `ranks` ranks, rank 1 slowed, with `options`: the shares move, and the model
    is one rank's; returns the runs' path and stdout."""
    out = tmp_path / "run"
    result = torchrun(ranks, "loop.py", out, *SLOW, *options)
    assert result.returncode == 0, result.stderr
    shares = np.load(f"{out}.shares.npy")
    assert len(set(shares.tolist())) > 1, "the shares never moved: nothing was tested"
    worst = np.abs(np.load(f"{out}.params.npy") - one_rank).max()
    print(f"{ranks} ranks {' '.join(options)}: max |difference| {worst:.1e}")
    assert worst < 1e-5, f"max |difference| {worst:.2e}, shares {shares.tolist()}"
    return out, result.stdout


@pytest.mark.parametrize("ddp", [False, True], ids=["module", "ddp"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_any_ranks_and_shares_train_the_model_of_one_rank(one_rank, tmp_path, ranks, ddp):
    trains_the_model_of_one_rank(one_rank, tmp_path, ranks, *(["--ddp"] if ddp else []))


@pytest.mark.parametrize("ddp", [False, True], ids=["module", "ddp"])
def test_step_backward_weights_the_loss_and_trains_the_model_of_one_rank(one_rank, tmp_path,
                                                                         ddp):  # fmt: skip
    """`step.backward(loss)` backpropagates the loss times the rank's weight, and the exchange
    then weights nothing again: the same model as one rank's, at moving shares."""
    trains_the_model_of_one_rank(one_rank, tmp_path, 2, "--step-backward",
                                 *(["--ddp"] if ddp else []))  # fmt: skip


def test_ddp_in_bfloat16_carries_the_ranks_values_in_a_tensor(one_rank, tmp_path):
    """bfloat16 has no numpy twin, so on the CPU too the hook writes the ranks' values into its
    block as a tensor and reads them back from one, as on every GPU: they reach the policy
    (the shares move to the faster rank 0), and the model is one rank's (float32) to within
    bfloat16's rounding over 15 steps (8 bits of mantissa: 0.016 at most, seen)."""
    out = tmp_path / "run"
    result = torchrun(2, "loop.py", out, *SLOW, "--ddp", "--step-backward", "--bf16")
    assert result.returncode == 0, result.stderr
    shares = np.load(f"{out}.shares.npy")
    last_epoch = shares[-5:]  # 600 samples in batches of 128
    assert np.median(last_epoch) > 64, f"rank 0's shares {shares.tolist()}: not the faster's"
    worst = np.abs(np.load(f"{out}.params.npy") - one_rank).max()
    assert worst < 0.05, f"max |difference| {worst:.2e}"


@pytest.mark.parametrize("backward", [[], ["--step-backward"]], ids=["own", "step"])
def test_ddp_with_many_buckets_trains_the_model_of_one_rank(one_rank, tmp_path, backward):
    """Every bucket but the last goes through the hook's callback on the all-reduce's future,
    the last is waited for in the hook: weighted in the hook (a backward pass of the loop's
    own) or in the backward pass (`step.backward`), the same model as one rank's."""
    trains_the_model_of_one_rank(one_rank, tmp_path, 2, "--ddp", "--buckets", *backward)


@pytest.fixture(scope="module")
def one_rank_clipped(tmp_path_factory):
    out = tmp_path_factory.mktemp("one-clipped") / "run"
    result = torchrun(1, "loop.py", out, "--clip", "synchronized")
    assert result.returncode == 0, result.stderr
    return np.load(f"{out}.params.npy")


@pytest.mark.parametrize(
    "clip, options",
    [("synchronized", []), ("synchronized", ["--step-backward"]), ("synchronized", ["--ddp"]),
     ("early", ["--ddp"])],
    ids=["module", "module-step-backward", "ddp", "ddp-before-finish"],
)  # fmt: skip
def test_gradients_clipped_after_the_exchange_train_the_model_of_one_rank(
    one_rank_clipped, tmp_path, clip, options
):
    """After `step.synchronize(loss)` every `.grad` is the global batch's, clipped by its norm
    as one process clips it; under DDP it is once the backward pass is over, so a DDP script's
    clip before `step.finish(loss)` stays where it is."""
    out, _ = trains_the_model_of_one_rank(one_rank_clipped, tmp_path, 2, "--clip", clip, *options)
    assert json.loads(Path(f"{out}.clipped.json").read_text()) >= 5  # of 15: the clip bound


def test_a_modules_gradients_clipped_before_the_exchange_train_another_model(
    one_rank_clipped, tmp_path
):
    """Without DDP the exchange is `step.finish`'s: clipped before it, each rank's norm is its
    own share's (the mistake `synchronize` avoids)."""
    out = tmp_path / "run"
    result = torchrun(2, "loop.py", out, *SLOW, "--clip", "early")
    assert result.returncode == 0, result.stderr
    worst = np.abs(np.load(f"{out}.params.npy") - one_rank_clipped).max()
    print(f"a module clipped before its exchange: max |difference| {worst:.1e}")
    assert worst > 1e-3


@pytest.fixture(scope="module")
def one_rank_amp(tmp_path_factory):
    out = tmp_path_factory.mktemp("one-amp") / "run"
    result = torchrun(1, "loop.py", out, "--amp")
    assert result.returncode == 0, result.stderr
    return np.load(f"{out}.params.npy")


@pytest.mark.parametrize("options", [[], ["--ddp"], ["--step-backward"]],
                         ids=["module", "ddp", "step-backward"])  # fmt: skip
def test_a_grad_scaler_skips_an_overflowed_step_on_every_rank(one_rank_amp, tmp_path, options):
    """`DynamicBatch(scaler=)` steps through `scaler.step` and `scaler.update`: the last rank's
    gradients overflow at one iteration, every rank skips that step and halves its scale, and
    the model is that of one rank that skipped the same step. `step.backward(loss)` scales
    the loss by the scaler itself."""
    _, stdout = trains_the_model_of_one_rank(one_rank_amp, tmp_path, 2, "--amp", *options)
    scales = re.findall(r"rank (\d) scale ([\d.]+)", stdout)
    assert sorted(scales) == [("0", "32768.0"), ("1", "32768.0")], scales


def test_the_skipped_step_is_what_the_scaler_changed(one_rank, one_rank_amp):
    """The reference the scaler's runs are held to is not the plain run's: the skipped step
    shows (the scaling itself, by powers of two, changes no bit)."""
    assert np.abs(one_rank_amp - one_rank).max() > 1e-3


@pytest.mark.parametrize("ddp", [False, True], ids=["module", "ddp"])
def test_a_probe_starts_balanced_and_trains_the_model_of_one_rank(one_rank, tmp_path, ddp):
    out = tmp_path / "run"
    result = torchrun(2, "loop.py", out, *SLOW, "--probe", *(["--ddp"] if ddp else []))
    assert result.returncode == 0, result.stderr
    first = int(np.load(f"{out}.shares.npy")[0])
    assert first > 64, f"rank 0's first share {first}: the probe did not move the split"
    assert np.abs(np.load(f"{out}.params.npy") - one_rank).max() < 1e-5


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_over_the_batch_sampler_trains_the_model_of_one_rank(
    one_rank, tmp_path, workers
):
    """Its workers ask for the indices ahead: the shares are the policy's of then, the same
    on every rank, and each sample is taken once an epoch."""
    out = tmp_path / "run"
    result = torchrun(2, "loop.py", out, *SLOW, "--ddp", "--loader", str(workers))
    assert result.returncode == 0, result.stderr[-3000:]
    shares = np.load(f"{out}.shares.npy")
    assert len(set(shares.tolist())) > 1, "the shares never moved: nothing was tested"
    assert np.abs(np.load(f"{out}.params.npy") - one_rank).max() < 1e-5
    indices = np.concatenate([np.load(f"{out}.indices-{r}.npy") for r in range(2)], axis=1)
    for epoch in indices:
        assert np.sort(epoch[epoch >= 0]).tolist() == list(range(600))


@pytest.mark.parametrize(
    "ddp, backward, per_iteration",
    [(False, [], {"all_reduce": 1}), (True, ["--step-backward"], {"all_reduce": 1}),
     (True, [], {"all_reduce": 2})],
    ids=["module", "ddp-step-backward", "ddp-own-backward"],
)  # fmt: skip
def test_the_ranks_times_travel_with_the_gradients(one_rank, tmp_path, ddp, backward,
                                                   per_iteration):  # fmt: skip
    """No gather of the ranks' times: each iteration's collectives are the gradients' (one
    bucket here), and under DDP after a backward pass of the loop's own, the losses'."""
    out = tmp_path / "run"
    result = torchrun(2, "loop.py", out, *SLOW, "--count", *backward, *(["--ddp"] if ddp else []))
    assert result.returncode == 0, result.stderr[-3000:]
    # non-greedy: the two ranks' lines may share a line of the pipe
    counted = re.findall(r"rank \d collectives (\{.*?\}) in (\d+) iterations", result.stdout)
    assert len(counted) == 2, result.stdout
    for calls, iterations in counted:
        expected = {name: n * int(iterations) for name, n in per_iteration.items()}
        assert json.loads(calls) == expected, (calls, iterations)
    assert np.abs(np.load(f"{out}.params.npy") - one_rank).max() < 1e-5


def test_mpiexec_starts_the_ranks_too(one_rank, tmp_path):
    out = tmp_path / "run"
    result = mpiexec(3, "loop.py", out, *SLOW, "--ddp")
    assert result.returncode == 0, result.stderr
    assert np.abs(np.load(f"{out}.params.npy") - one_rank).max() < 1e-5


def test_every_sample_once_per_epoch(tmp_path):
    out = tmp_path / "run"
    result = torchrun(3, "loop.py", out, *SLOW)
    assert result.returncode == 0, result.stderr
    indices = np.concatenate([np.load(f"{out}.indices-{r}.npy") for r in range(3)], axis=1)
    for epoch in indices:
        taken = np.sort(epoch[epoch >= 0])
        assert taken.tolist() == list(range(600))


def test_a_loss_per_sample_is_refused_in_one_line_on_every_rank(tmp_path):
    result = torchrun(2, "loop.py", tmp_path / "run", "--loss", "per-sample")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "step.finish() needs" in line]
    assert lines and "the mean loss over this rank's share (a 0-d tensor" in lines[0]
    assert not list(tmp_path.glob("*.npy"))  # nothing written


@pytest.mark.parametrize("ddp", [[], ["--ddp"]], ids=["module", "ddp"])
def test_an_optimizer_step_of_the_scripts_own_is_refused_in_one_line(tmp_path, ddp):
    """Left in from a DDP script, it would step twice an iteration, training silently worse."""
    result = torchrun(2, "loop.py", tmp_path / "run", "--own-step", *ddp)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "besides step.finish" in line]
    assert lines and "remove your optimizer.step()" in lines[0], result.stderr[-2000:]
    assert not list(tmp_path.glob("*.npy"))


def test_a_killed_rank_ends_the_job_through_torchrun(tmp_path):
    """torchrun's own failure handling: a worker lost, the others are stopped, it exits."""
    out = tmp_path / "run"
    job = subprocess.Popen(
        [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=3", str(HERE / "loop.py"),
         str(out), "--epochs", "1000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    pids = [tmp_path / f"run.pid-{rank}" for rank in range(3)]
    deadline = time.monotonic() + 120
    while not all(p.exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # training now
    os.kill(int(pids[1].read_text()), signal.SIGKILL)
    killed = time.monotonic()
    _, stderr = job.communicate(timeout=60)
    assert job.returncode != 0
    assert time.monotonic() - killed < 30
    assert "Signal 9 (SIGKILL) received" in stderr or "exitcode  : -9" in stderr, stderr[-2000:]
    for rank in (0, 2):
        assert not Path(f"/proc/{pids[rank].read_text()}").exists()

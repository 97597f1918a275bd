"""Real upstream scripts ported to dynalloc (examples/ports): PyTorch's torchrun DDP tutorial
and Horovod's PyTorch MNIST example train on 2 ranks at 1:3 the model of 1 process, their slow
rank given fewer samples, in a handful of changed lines beyond their CPU changes and their
data's download."""

import difflib
import json
import runpy
import subprocess
import sys

import numpy as np
import torch
from launchers import BIN, ENV, HERE, ROOT, stage_mnist

TUTORIAL = ROOT / "examples" / "ports" / "ddp_tutorial"
HOROVOD = ROOT / "examples" / "ports" / "horovod_torch"
SAVED_AT = 10  # the optimizer step after which Horovod's port's parameters are compared
sys.path.insert(0, str(TUTORIAL))
from datautils import MyTrainDataset  # noqa: E402


def changed_lines(before, after):
    """Lines added and removed from `before` to `after` (as `diff -u` shows them)."""
    diff = difflib.unified_diff(before.read_text().splitlines(), after.read_text().splitlines(),
                                lineterm="", n=0)  # fmt: skip
    lines = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    return sum(line.startswith("+") for line in lines), sum(line.startswith("-") for line in lines)


def tutorial(tmp_path, ranks, batch_size, *slow):
    """The port on `ranks` torchrun ranks for 5 epochs, in a directory of its own (its
    snapshot.pt); (its final parameters, the shares of each rank, as port_runner wrote them)."""
    run = tmp_path / f"r{ranks}"
    run.mkdir()
    command = [BIN / "torchrun", "--standalone", f"--nproc-per-node={ranks}",
               HERE / "port_runner.py", *slow, "--mse", TUTORIAL / "multigpu_torchrun.py", "5", "1",
               "--batch_size", str(batch_size)]  # fmt: skip
    env = {**ENV, "PYTHONPATH": f"{TUTORIAL}:{ENV.get('PYTHONPATH', '')}"}
    result = subprocess.run(list(map(str, command)), cwd=run, capture_output=True, text=True,
                            env=env, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    state = torch.load(run / "snapshot.pt")["MODEL_STATE"]
    shares = {int(p.stem.removeprefix("shares-")): json.loads(p.read_text())
              for p in run.glob("shares-*.json")}  # fmt: skip
    return np.concatenate([v.numpy().ravel() for v in state.values()]), shares


def test_the_ddp_tutorial_trains_the_model_of_one_process_balanced(tmp_path):
    one, _ = tutorial(tmp_path, 1, 64)
    two, shares = tutorial(tmp_path, 2, 32, "--slow", "1=3")
    torch.manual_seed(0)
    MyTrainDataset(2048)  # the tutorial's draws: its data, then its model's
    initial = torch.nn.Linear(20, 1)
    moved = np.abs(one - np.concatenate([initial.weight.detach().numpy().ravel(),
                                         initial.bias.detach().numpy()])).max()  # fmt: skip
    assert moved > 1e-3, "the model did not train: nothing was tested"
    worst = np.abs(two - one).max()
    print(f"DDP tutorial, 2 ranks at 1:3 vs 1 process: max |difference| {worst:.1e}")
    assert worst < 1e-6
    assert np.mean(shares[1][-20:]) < 0.4 * 64, shares[1]  # the slow rank's share fell
    added, removed = changed_lines(TUTORIAL / "upstream_cpu.py", TUTORIAL / "multigpu_torchrun.py")
    print(f"ported in {added} lines added and {removed} removed")
    assert added <= 12


def horovod(tmp_path, ranks, *options):
    """Horovod's MNIST example, ported, on `ranks` torchrun ranks for one epoch without dropout
    (port_runner says why): (its parameters after SAVED_AT steps, the shares of each rank)."""
    mnist = tmp_path / "mnist"
    if not mnist.exists():
        stage_mnist(mnist)
    run = tmp_path / f"h{ranks}"
    run.mkdir()
    command = [BIN / "torchrun", "--standalone", f"--nproc-per-node={ranks}",
               HERE / "port_runner.py", *options, "--no-dropout", "--save-at", SAVED_AT,
               HOROVOD / "pytorch_mnist.py", "--epochs", "1", "--data-dir", mnist,
               "--batch-size", 64 // ranks, "--lr", 0.02 / ranks]  # fmt: skip
    result = subprocess.run(list(map(str, command)), cwd=run, capture_output=True, text=True,
                            env=ENV, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    saved = torch.load(run / "saved.pt")
    shares = {int(p.stem.removeprefix("shares-")): json.loads(p.read_text())
              for p in run.glob("shares-*.json")}  # fmt: skip
    return np.concatenate([v.numpy().ravel() for v in saved.values()]), shares


def test_horovods_pytorch_mnist_trains_the_model_of_one_process_balanced(tmp_path):
    # Horovod's script scales the learning rate and the batch by the ranks: the same global
    # batch of 64 and rate of 0.02 for both runs.
    one, _ = horovod(tmp_path, 1)
    two, shares = horovod(tmp_path, 2, "--slow", "1=3")
    torch.manual_seed(42)  # the script's seed, then its model
    initial = runpy.run_path(str(HOROVOD / "pytorch_mnist.py"), run_name="port")["Net"]()
    start = np.concatenate([v.detach().numpy().ravel() for v in initial.state_dict().values()])
    assert np.abs(one - start).max() > 1e-3, "the model did not train: nothing was tested"
    worst = np.abs(two - one).max()
    print(f"Horovod pytorch_mnist, 2 ranks at 1:3 vs 1 process: max |difference| {worst:.1e} "
          f"after {SAVED_AT} steps (shares {shares[1][:SAVED_AT]} of 64)")  # fmt: skip
    assert worst < 1e-6
    assert sum(share < 32 for share in shares[1][:SAVED_AT]) >= 3, shares[1][:SAVED_AT]
    assert np.mean(shares[1][-20:]) < 0.4 * 64, shares[1]  # the slow rank's share fell
    added, removed = changed_lines(HOROVOD / "upstream_staged.py", HOROVOD / "pytorch_mnist.py")
    print(f"ported in {added} lines added and {removed} removed")
    assert added <= 17

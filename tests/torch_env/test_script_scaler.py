"""A PyTorch script with a `GradScaler` (mixed precision), recorded through `dynalloc train`
(`script:`): `run.start(..., scaler=scaler)` keeps the scaler's state in the checkpoints, so a
run stopped at its first checkpoint and resumed ends where the uninterrupted run ends, the
scaler's scale and growth tracker included."""

import json

import numpy as np
import torch
import yaml
from launchers import dynalloc_train, stage_digits, stopped_at_a_checkpoint

SCRIPT = """
import json
import numpy as np
import torch
from torch import nn
from dynalloc.torch import Recorder

with Recorder.from_environment() as run:
    torch.manual_seed(run.config["seed"])
    model = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(run.data.input_shape)), 32),
                          nn.ReLU(), nn.Linear(32, run.data.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", growth_interval=3)
    loss_fn = nn.CrossEntropyLoss()
    dyn = run.start(model, optimizer, scaler=scaler)
    # Every seventh iteration overflows: the scale halves there and doubles after every three
    # good steps, twice as high a week later, so a fresh scaler's differs at any later point
    # (in the first week the scale comes back to where it began, at iteration 6).
    next(model.parameters()).register_hook(
        lambda grad: grad * float("inf") if dyn.iteration % 7 == 2 else grad)
    for epoch in run.epochs():
        for step in run.steps(epoch):
            x, y = run.batch(step)
            with step.compute():
                loss = loss_fn(model(x), y)
                step.backward(loss)
            step.finish(loss)
        run.end_epoch(*run.evaluate(model, loss_fn))
    with open(f"{OUT}-{run.rank}.json", "w") as out:
        json.dump(scaler.state_dict(), out)
"""


def parameters(run):
    state = torch.load(run / "model.params")
    return np.concatenate([v.numpy().ravel() for v in state.values()])


def test_a_stopped_script_resumes_with_its_scalers_state(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "dataset": str(stage_digits(tmp_path / "digits")), "framework": "torch",
        "script": str(tmp_path / "amp_script.py"), "global_batch": 128, "epochs": 12,
        "policy": {"name": "static"}, "checkpoint": {"every": 20, "keep": 2},
    }))  # fmt: skip
    (tmp_path / "amp_script.py").write_text(f"OUT = {str(tmp_path / 'scaler')!r}\n" + SCRIPT)
    whole = dynalloc_train(2, config, tmp_path / "whole", "mpiexec")
    assert whole.returncode == 0, whole.stderr[-3000:]
    scaler = json.loads((tmp_path / "scaler-0.json").read_text())
    assert scaler["scale"] != 65536.0, scaler  # the scale moved: its state was tested
    out = tmp_path / "stopped"
    returncode, stderr = stopped_at_a_checkpoint(config, out)
    assert returncode == 75, stderr[-3000:]
    again = dynalloc_train(2, config, out, "mpiexec")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stderr
    assert np.array_equal(parameters(out), parameters(tmp_path / "whole"))
    for rank in (0, 1):
        resumed = json.loads((tmp_path / f"scaler-{rank}.json").read_text())
        assert resumed == scaler, (rank, resumed, scaler)

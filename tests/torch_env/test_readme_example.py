"""The PyTorch example of docs/pytorch.md, taken from the page and run on two torchrun ranks."""

import re

from launchers import ROOT, stage_digits, torchrun

SETUP = """
import numpy as np
from dynalloc.data.staged import load_staged

torch.manual_seed(0)  # a reproducible initialisation: the test asserts an accuracy
data = load_staged({dataset!r})
train_x = torch.tensor(np.asarray(data.train_x, dtype=np.float32))
train_y = torch.tensor(np.asarray(data.train_y, dtype=np.int64))
epochs = 10


def build_your_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
"""

CHECK = """
compute = np.array([row.compute_s for row in dyn.rows])
assert len(dyn.rows) == epochs * -(-len(train_x) // 512) and np.all(compute > 0)
test_x = torch.tensor(np.asarray(data.test_x, dtype=np.float32))
with torch.no_grad():
    correct = (model(test_x).argmax(1).numpy() == data.test_y).mean()
print(f"rank {dyn.rank}: shares {dyn.shares.tolist()}, test accuracy {correct:.3f}")
assert correct > 0.8, correct
"""


def page_example():
    text = (ROOT / "docs" / "pytorch.md").read_text()
    section = text.split("## Your own PyTorch loop", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_trains_on_two_ranks(tmp_path):
    digits = stage_digits(tmp_path / "digits")
    code = page_example()
    head, rest = code.split("\nmodel = build_your_model()", 1)
    script = tmp_path / "example.py"
    script.write_text(
        head + SETUP.format(dataset=str(digits)) + "\nmodel = build_your_model()" + rest + CHECK
    )
    result = torchrun(2, script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("test accuracy") == 2

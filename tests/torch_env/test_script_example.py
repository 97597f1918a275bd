"""The PyTorch script of docs/own-training.md, taken from the page and started by torchrun
through `dynalloc train` (`framework: torch`, `script:`): it records the run directory
`dynalloc train` writes, and its config.yaml names the script, no model or optimizer."""

import json
import re
import subprocess

import yaml
from launchers import BIN, ENV, ROOT, stage_digits


def page_script():
    text = (ROOT / "docs" / "own-training.md").read_text()
    section = text.split("## Gluon and PyTorch side by side", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_pages_torch_script_records_its_run_under_torchrun(tmp_path):
    script = tmp_path / "my_torch_script.py"
    script.write_text(page_script())
    config = tmp_path / "torch-script.yaml"
    config.write_text(yaml.safe_dump({
        "dataset": str(stage_digits(tmp_path / "digits")), "framework": "torch",
        "script": str(script), "global_batch": 256, "epochs": 3,
    }))  # fmt: skip
    out = tmp_path / "run"
    command = [BIN / "torchrun", "--standalone", "--nproc-per-node=2", BIN / "dynalloc", "train",
               "--config", config, "--out", out]  # fmt: skip
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True, env=ENV,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    recorded = yaml.safe_load((out / "config.yaml").read_text())
    assert recorded["script"] == str(script) and recorded["ranks"] == 2
    assert recorded["model"] is None and recorded["optimizer"] is None
    epochs = (out / "epochs.csv").read_text().strip().splitlines()
    assert len(epochs) == 4, epochs  # a header and three epochs
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "my_torch_script" and metrics["final_test_accuracy"] > 0.8

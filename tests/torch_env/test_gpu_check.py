"""benchmarks/gpu_check.py, which checks the PyTorch adapter on a CUDA GPU: its `--cpu`
self-test runs the very same checks here on the CPU, and without a GPU it says so in one line."""

import re
import subprocess

import pytest
import torch
from launchers import BIN, ENV, ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def gpu_check(*args):
    return subprocess.run([str(BIN / "python"), str(SCRIPT), *args], capture_output=True,
                          text=True, env=ENV, timeout=300)  # fmt: skip


def test_the_checks_pass_on_the_cpu():
    result = gpu_check("--cpu")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    for name in ("plain module", "DDP + dynalloc's hook"):
        [line] = [line for line in lines if line.startswith(f"exactness, {name}, gloo:")]
        worst = float(re.search(r"max \|parameter difference\| (\S+) against 1 process", line)[1])
        assert worst < 1e-5 and line.endswith(": PASS"), line
        shares = re.search(r"rank 0's share (\d+) -> (\d+) of 128", line)
        assert shares[1] == "64" and shares[2] != "64", line  # adaptive moved them
        [line] = [line for line in lines if line.startswith(f"timing, {name}:")]
        assert "against the thread's CPU time" in line and line.endswith(": PASS"), line
    [line] = [line for line in lines if line.startswith("throughput, gloo, rank 1 3x slower")]
    assert re.search(r"adaptive [\d,]+ samples/s .* plain DDP [\d,]+ samples/s", line), line
    assert lines[-1].startswith("gpu-check: 5 passed, 0 failed"), lines[-1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here")
def test_without_a_gpu_it_says_so_in_one_line_and_checks_nothing():
    result = gpu_check()
    assert result.returncode == 0, result.stderr
    said = f"gpu-check: no CUDA GPU here (torch {torch.__version__}): nothing checked\n"
    assert result.stdout == said

"""`dynalloc.torch.local_rank()`: the GPU a rank takes, as Horovod's `hvd.local_rank()`, under
each launcher a PyTorch script meets (torchrun sets LOCAL_RANK; mpiexec its own variables)."""

import subprocess
import sys

import pytest
from launchers import BIN, ENV

PROGRAM = (
    "from dynalloc.launcher import launcher_rank; from dynalloc.torch import local_rank; "
    "print(launcher_rank(), local_rank())"
)


@pytest.mark.parametrize("launcher", ["torchrun", "mpiexec"])
def test_each_rank_of_one_node_has_its_own_local_rank(launcher, tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(PROGRAM + "\n")
    if launcher == "torchrun":
        command = [BIN / "torchrun", "--standalone", "--nproc_per_node=3", script]
    else:
        command = [BIN / "mpiexec", "-n", "3", sys.executable, script]
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    pairs = sorted(tuple(map(int, line.split())) for line in result.stdout.splitlines())
    assert pairs == [(0, 0), (1, 1), (2, 2)]

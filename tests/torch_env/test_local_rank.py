"""`dynalloc.torch.local_rank()`: the GPU a rank takes, as Horovod's `hvd.local_rank()`, under
each launcher a PyTorch script meets (torchrun sets LOCAL_RANK; mpiexec its own variables)."""

import launchers
import pytest

PROGRAM = (
    "from dynalloc.launcher import launcher_rank; from dynalloc.torch import local_rank; "
    "print(launcher_rank(), local_rank())"
)


@pytest.mark.parametrize("launcher", [launchers.torchrun, launchers.mpiexec])
def test_each_rank_of_one_node_has_its_own_local_rank(launcher, tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(PROGRAM + "\n")
    result = launcher(3, script, timeout=120)  # an absolute script path is taken as it is
    assert result.returncode == 0, result.stderr
    pairs = sorted(tuple(map(int, line.split())) for line in result.stdout.splitlines())
    assert pairs == [(0, 0), (1, 1), (2, 2)]

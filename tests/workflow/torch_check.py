"""Reading a PyTorch run's model.params from this (the MXNet) environment, which has no torch:
through the PyTorch environment's interpreter."""

import subprocess

from helpers import ROOT

TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"


def state_dict_keys(path):
    """The names of the tensors `torch.save` wrote to `path`."""
    code = "import sys, torch; print(' '.join(torch.load(sys.argv[1]).keys()))"
    result = subprocess.run([str(TORCH_PYTHON), "-c", code, str(path)], capture_output=True,
                            text=True, check=True)  # fmt: skip
    return result.stdout.split()

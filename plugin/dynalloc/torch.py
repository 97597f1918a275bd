"""dynalloc for PyTorch, in one import: `from dynalloc.torch import DynamicBatch, Recorder`.

`DynamicBatch` goes in your own loop over `torch.distributed` ranks (docs/pytorch.md), with
`init_process_group` for ranks that mpiexec or srun started, `local_rank` for the GPU a rank
takes, and `share_weighted_hook` for DDP;
`Recorder` keeps a run directory as `dynalloc train` keeps it. The code lives in
`dynalloc.runtime.torch` (PyTorch's adapter) and `dynalloc.runtime.common`."""

from dynalloc.launcher import local_rank
from dynalloc.runtime.common.recorder import Recorder
from dynalloc.runtime.torch import (
    DynamicBatch,
    ShareWeight,
    init_process_group,
    share_weighted_hook,
)

__all__ = [
    "DynamicBatch",
    "Recorder",
    "ShareWeight",
    "init_process_group",
    "local_rank",
    "share_weighted_hook",
]

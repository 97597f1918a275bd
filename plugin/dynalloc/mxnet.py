"""dynalloc for MXNet Gluon, in one import: `from dynalloc.mxnet import DynamicBatch, Recorder`.

`DynamicBatch` goes in your own Gluon loop over MPI ranks (docs/own-training.md); `Recorder`
keeps a run directory as `dynalloc train` keeps it, for a script that `dynalloc train` starts.
A Horovod script takes `import dynalloc.mxnet as hvd`: `DistributedTrainer` and the rank
functions it calls (`runtime.mxnet.trainer`). The code lives in `dynalloc.runtime.mxnet`
(MXNet's adapter) and `dynalloc.runtime.common`."""

from dynalloc.runtime.common.recorder import Recorder
from dynalloc.runtime.mxnet.gluon import DynamicBatch
from dynalloc.runtime.mxnet.trainer import (
    DistributedTrainer,
    broadcast_parameters,
    init,
    local_rank,
    rank,
    size,
)

__all__ = [
    "DistributedTrainer",
    "DynamicBatch",
    "Recorder",
    "broadcast_parameters",
    "init",
    "local_rank",
    "rank",
    "size",
]

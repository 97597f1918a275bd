"""Runs the Horovod port as mpiexec starts it, for the tests: MXNet seeded first (the
initialisation rank 0 broadcasts), and with `--slow R=F` rank R emulated F times slower through
DistributedTrainer's `slowdown`; rank 0 saves the parameters after the first epoch to
epoch1.npz, and at exit each rank prints its shares. (Float32 rounding grows from epoch to epoch
in this network: parameters of 1 process and 2 ranks differ by 1e-6 after one epoch, 1e-3 after
three.)

    mpiexec -n N python horovod_runner.py [--slow R=F] SCRIPT [SCRIPT'S ARGUMENTS]
"""

import atexit
import runpy
import sys

import dynalloc.mxnet
import mxnet as mx
import numpy as np

arguments = sys.argv[1:]
factors = {}
if arguments[0] == "--slow":
    rank, factor = arguments[1].split("=")
    factors, arguments = {int(rank): float(factor)}, arguments[2:]
mx.random.seed(0)
mine = factors.get(dynalloc.mxnet.rank(), 1.0)
made = []
plain = dynalloc.mxnet.DistributedTrainer


class Emulated(plain):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, slowdown=lambda iteration: mine, **kwargs)
        made.append(self)

    def step(self, loss, ignore_stale_grad=False):
        mean = super().step(loss, ignore_stale_grad)
        dynamic = self.dynamic
        if dynamic.rank == 0 and dynamic.iteration == dynamic.sampler.batches_per_epoch:
            np.savez("epoch1.npz", *[p.data().asnumpy() for p in self._params])
        return mean


def report():
    if made:
        dynamic = made[0].dynamic
        print(f"rank {dynamic.rank} shares", [row.batch_size for row in dynamic.rows])


dynalloc.mxnet.DistributedTrainer = Emulated
atexit.register(report)
sys.argv = arguments
runpy.run_path(arguments[0], run_name="__main__")

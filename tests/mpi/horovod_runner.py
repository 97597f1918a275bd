"""Runs the Horovod port as mpiexec starts it, for the tests: MXNet seeded first (the
initialisation rank 0 broadcasts), and with `--slow R=F` rank R emulated F times slower through
DistributedTrainer's `slowdown`; rank 0 saves the parameters after iteration K (`--save-at`) to
saved.npz, and at exit each rank writes its shares to shares-RANK.json (a file: the ranks'
prints interleave on one pipe). Why that early: float32 rounding of sums in another order (a
split batch) differs by ~1e-7, and where a ReLU or max-pool input sits that close to its kink
the two runs take different branches from there: parameters of 1 process and 2 ranks differ by
6e-8 after 10 iterations, but by anything from 1e-6 to 2e-3 after the first epoch, depending on
which shares timing gave.

    mpiexec -n N python horovod_runner.py --save-at K [--slow R=F] SCRIPT [SCRIPT'S ARGUMENTS]
"""

import atexit
import json
import runpy
import sys

import dynalloc.mxnet
import mxnet as mx
import numpy as np

assert sys.argv[1] == "--save-at"
saved_at, arguments = int(sys.argv[2]), sys.argv[3:]
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
        if dynamic.rank == 0 and dynamic.iteration == saved_at:
            np.savez("saved.npz", *[p.data().asnumpy() for p in self._params])
        return mean


@atexit.register
def write_shares():
    if made:
        dynamic = made[0].dynamic
        with open(f"shares-{dynamic.rank}.json", "w") as out:
            json.dump([row.batch_size for row in dynamic.rows], out)


dynalloc.mxnet.DistributedTrainer = Emulated
sys.argv = arguments
runpy.run_path(arguments[0], run_name="__main__")

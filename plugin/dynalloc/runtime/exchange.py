"""Weighted gradient exchange over MPI: the sum of every rank's gradient times `b_r / B`.

Each rank holds the gradient of the mean loss over its `b_r` samples; weighting by `b_r / B` and
summing gives exactly the gradient of the mean loss over all B samples, whatever the shares.
(Gluon's `backward` gives the gradient of the *sum* over the samples, `b_r` times that mean, so
the Gluon layer passes the weight `1 / B`: the same product.) All
gradients go through one preallocated contiguous float32 buffer and one in-place `Allreduce`
through the buffer interface: no pickling, no per-tensor messages on the hot path. The tensors are
plain writable numpy arrays (the Gluon layer hands in views of MXNet's gradient memory), so this
module knows nothing of MXNet.

Where a node's ranks outnumber the cores they may run on, ranks that finish early wait for the
others in a barrier that sleeps between polls rather than in the Allreduce, where MPICH spins: a
spinning rank takes half of its core from the rank that shares it, often the very rank it waits
for. With a core each, spinning costs nobody and answers fastest, so they spin.
"""

import os
import time

import numpy as np
from mpi4py import MPI


class GradientExchange:
    """Packs `tensors` (writable float32 arrays) into one buffer for collective operations."""

    def __init__(self, tensors, comm=None, sleep_while_waiting=None):
        """`sleep_while_waiting`: another exchange's on the same communicator, to skip the
        collective check (`ranks_share_cores`) of how early ranks should wait."""
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.tensors = [t.reshape(-1) for t in tensors]  # views: the arrays must be contiguous
        if any(
            t.size and not np.shares_memory(flat, t)
            for flat, t in zip(self.tensors, tensors, strict=True)
        ):
            raise ValueError("gradient tensors must be contiguous")
        self.offsets = np.cumsum([0] + [t.size for t in self.tensors])
        self.buffer = np.empty(int(self.offsets[-1]), dtype=np.float32)
        self.timing = np.empty(0)
        if sleep_while_waiting is None:
            sleep_while_waiting = self.size > 1 and ranks_share_cores(self.comm)
        self.sleep_while_waiting = sleep_while_waiting

    @property
    def rank(self):
        return self.comm.Get_rank()

    @property
    def size(self):
        return self.comm.Get_size()

    def _pack(self, weight):
        for tensor, start, stop in zip(self.tensors, self.offsets, self.offsets[1:], strict=False):
            np.multiply(tensor, weight, out=self.buffer[start:stop])

    def _unpack(self):
        for tensor, start, stop in zip(self.tensors, self.offsets, self.offsets[1:], strict=False):
            tensor[:] = self.buffer[start:stop]

    def allreduce(self, weight):
        """Replace every tensor by the sum over ranks of `weight_r * tensor_r`; returns seconds."""
        started = time.perf_counter()
        self._pack(weight)
        if self.size > 1:
            if self.sleep_while_waiting:
                self._arrive()
            self.comm.Allreduce(MPI.IN_PLACE, self.buffer, op=MPI.SUM)
        self._unpack()
        return time.perf_counter() - started

    def _arrive(self):
        """Return once every rank has arrived, sleeping between polls: the pause grows from
        50 us to at most 1 ms, so the latency it adds stays a small fraction of the wait."""
        request = self.comm.Ibarrier()
        pause = 5e-5
        while not request.Test():
            time.sleep(pause)
            pause = min(pause * 1.5, 1e-3)

    def broadcast(self, root=0):
        """Make every rank's tensors equal to `root`'s (the same starting parameters)."""
        if self.size > 1:
            self._pack(1.0)
            self.comm.Bcast(self.buffer, root=root)
            self._unpack()

    def allgather(self, values):
        """Every rank's small float vector, as a (ranks, len) array: one tiny collective."""
        mine = np.asarray(values, dtype=np.float64)
        if self.timing.shape != (self.size, mine.size):
            self.timing = np.empty((self.size, mine.size))
        self.comm.Allgather(mine, self.timing)
        return self.timing.copy()

    def allsum(self, values):
        """Sum of a small float vector over ranks (evaluation counts, losses)."""
        total = np.asarray(values, dtype=np.float64).copy()
        if self.size > 1:
            self.comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
        return total

    def gather_objects(self, obj, root=0):
        """Pickled gather, for per-epoch logs only (off the hot path)."""
        return self.comm.gather(obj, root=root)


def ranks_share_cores(comm):
    """Whether the ranks on this rank's node outnumber the cores they may run on (their CPU
    affinity: pinned two to a core, or more ranks than a cgroup's CPUs). Collective."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        cores = set().union(*node.allgather(os.sched_getaffinity(0)))
        shared = len(cores) < node.Get_size()
    finally:
        node.Free()
    return bool(comm.allreduce(shared, op=MPI.LOR))

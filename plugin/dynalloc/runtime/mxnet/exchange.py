"""Weighted gradient exchange over MPI: the sum of every rank's gradient times `b_r / B`.

Each rank holds the gradient of the mean loss over its `b_r` samples; weighting by `b_r / B` and
summing gives exactly the gradient of the mean loss over all B samples, whatever the shares.
(Gluon's `backward` gives the gradient of the *sum* over the samples, `b_r` times that mean, so
the Gluon layer leaves the `1 / B` to the optimizer's `rescale_grad`, and sums unweighted.)
A large tensor (at least IN_PLACE_VALUES values) is reduced in place through its own memory; the
small ones go together through one preallocated float32 buffer, so that each adds no message of
its own. Packing every tensor, as this module once did, cost two more passes over the memory and
put the exchange at 1.8-2.1x a bare Allreduce of the same bytes. The Gluon layer goes further: it
keeps all gradients in one array (`gluon.gradients_in_one_array`) and hands in that array alone,
so the exchange is one in-place Allreduce. All `Allreduce`s go through the buffer interface: no
pickling. The tensors are plain writable numpy arrays (the Gluon layer hands in views of MXNet's
memory), so this module knows nothing of MXNet.

Where a node's ranks outnumber the cores they may run on, ranks that finish early wait for the
others in a barrier that sleeps between polls rather than in the Allreduce, where MPICH spins: a
spinning rank takes half of its core from the rank that shares it, often the very rank it waits
for. With a core each, spinning costs nobody and answers fastest, so they spin.
"""

import os
import time

import numpy as np
from mpi4py import MPI

IN_PLACE_VALUES = 1 << 16  # float32 values (256 KiB) from which a tensor is reduced in place


class GradientExchange:
    """Collective operations over `tensors` (writable float32 arrays): the large ones in place,
    the small ones packed into one buffer."""

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
        # A lone tensor goes in place whatever its size: there is nothing to pack it with.
        in_place = IN_PLACE_VALUES if len(self.tensors) > 1 else 0
        self.large = [t for t in self.tensors if t.size >= in_place]
        self.small = [t for t in self.tensors if t.size < in_place]
        self.offsets = np.cumsum([0] + [t.size for t in self.small])
        self.buffer = np.empty(int(self.offsets[-1]), dtype=np.float32)
        # What each collective runs over: the large tensors, then the buffer of the small.
        self.parts = [*self.large, self.buffer] if self.buffer.size else self.large
        self.timing = np.empty(0)
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if sleep_while_waiting is None:
            sleep_while_waiting = self.size > 1 and ranks_share_cores(self.comm)
        self.sleep_while_waiting = sleep_while_waiting

    def _pack(self, weight):
        for tensor, start, stop in zip(self.small, self.offsets, self.offsets[1:], strict=False):
            np.multiply(tensor, weight, out=self.buffer[start:stop])

    def _unpack(self):
        for tensor, start, stop in zip(self.small, self.offsets, self.offsets[1:], strict=False):
            tensor[:] = self.buffer[start:stop]

    def allreduce(self, weight=1.0):
        """Replace every tensor by the sum over ranks of `weight_r * tensor_r`; returns seconds.
        A weight of 1 costs no pass over the large tensors."""
        started = time.perf_counter()
        if self.small:
            self._pack(weight)
        if weight != 1.0:
            for tensor in self.large:
                np.multiply(tensor, weight, out=tensor)
        if self.size > 1:
            if self.sleep_while_waiting:
                self._arrive()
            for part in self.parts:
                self.comm.Allreduce(MPI.IN_PLACE, part, op=MPI.SUM)
        if self.small:
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
            for part in self.parts:
                self.comm.Bcast(part, root=root)
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

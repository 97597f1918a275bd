"""Run on 4 ranks, 2 a node: the link's latency and seconds per byte between the nodes
(ping-pong of rank 0 and rank 2), and the Allreduce of LeNet's gradient, as JSON from rank 0.
tests/cluster/test_multihost.py compares the Allreduce with what core.allreduce predicts from
the ping-pong, the network model of `dynalloc simulate`."""

import json
import statistics
import sys
import time

import numpy as np
from dynalloc.core.gradients import gradient_bytes
from mpi4py import MPI

REPEATS = 30
LARGE = 1 << 22  # bytes of the ping-pong that measures the seconds per byte


def ping_pong(comm, size, partner):
    """Fastest one-way seconds of `size` bytes between this rank and `partner`: the link's own.
    The others carry the scheduling of four ranks and the kernel's TCP work on two cores (under
    a loaded machine the median latency of 8 bytes reached 3 ms, and six of them in the ring
    model's steps exceeded the very Allreduce it bounds)."""
    message = np.zeros(size, dtype=np.uint8)
    times = []
    for _ in range(REPEATS):
        comm.Barrier()
        began = time.perf_counter()
        if comm.rank == 0:
            comm.Send(message, dest=partner)
            comm.Recv(message, source=partner)
        elif comm.rank == partner:
            comm.Recv(message, source=0)
            comm.Send(message, dest=0)
        times.append((time.perf_counter() - began) / 2)
    return min(times)


def allreduce(comm, nbytes):
    gradient = np.ones(nbytes // 4, dtype=np.float32)
    times = []
    for _ in range(REPEATS):
        comm.Barrier()
        began = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, gradient)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main():
    comm = MPI.COMM_WORLD
    partner = comm.size // 2  # the first rank of the second node
    alpha = ping_pong(comm, 8, partner)
    beta = (ping_pong(comm, LARGE, partner) - alpha) / LARGE
    nbytes = gradient_bytes("lenet")
    measured = allreduce(comm, nbytes)
    if comm.rank == 0:
        figures = {"alpha": alpha, "beta": beta, "bytes": nbytes, "allreduce_s": measured}
        json.dump(figures, sys.stdout)


if __name__ == "__main__":
    main()

"""Under `mpiexec -n 2`: what a waiting rank costs the rank it waits for when both share a core.

Both ranks are pinned to core 0. Rank 0 computes (a fixed busy loop) while rank 1, done at once,
waits for it, in one of three ways: alone (no second rank computing or waiting: rank 1 sleeps
until rank 0 is done), in MPICH's blocking Allreduce (which spins), or in GradientExchange's
arrival barrier (which sleeps between polls). Prints rank 0's median compute seconds for each,
and their ratio to "alone", e.g.

    .venv-train/bin/mpiexec -n 2 .venv-train/bin/python benchmarks/waiting_neighbour.py
"""

import os
import time

import numpy as np
from dynalloc.runtime.mxnet.exchange import GradientExchange
from mpi4py import MPI

comm = MPI.COMM_WORLD
os.sched_setaffinity(0, {0})
exchange = GradientExchange([np.zeros(1_000_000, dtype=np.float32)], comm)


def busy():
    total = 0
    for i in range(2_000_000):
        total += i
    return total


def measure(wait, repeats=7):
    seconds = []
    for _ in range(repeats):
        comm.Barrier()
        started = time.perf_counter()
        if comm.Get_rank() == 0:
            busy()
            seconds.append(time.perf_counter() - started)
        wait()
    return float(np.median(seconds)) if seconds else 0.0


def alone():
    """Rank 1 blocks in a receive that rank 0 answers: a sleeping wait outside MPI's spin."""
    if comm.Get_rank() == 0:
        comm.send(None, dest=1)
    else:
        while not comm.Iprobe(source=0):
            time.sleep(0.01)
        comm.recv(source=0)


results = {
    "alone": measure(alone),
    "spinning Allreduce": measure(lambda: comm.Allreduce(MPI.IN_PLACE, exchange.buffer)),
    "sleeping arrival (GradientExchange)": measure(lambda: exchange.allreduce(1.0)),
}
if comm.Get_rank() == 0:
    for name, seconds in results.items():
        print(f"{name:38s} {seconds:.3f} s  {seconds / results['alone']:.2f}x alone")

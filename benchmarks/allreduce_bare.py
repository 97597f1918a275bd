"""Under mpiexec: median seconds of a bare in-place MPI Allreduce of N float32 values, the
ranks released together by a barrier (what the gradient exchange cannot beat)."""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
values, repeats = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 200
buffer = np.ones(values, dtype=np.float32)
samples = []
for i in range(repeats + 20):
    comm.Barrier()
    began = time.perf_counter()
    comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
    if i >= 20:  # warm-up first
        samples.append(time.perf_counter() - began)
slowest = comm.reduce(float(np.median(samples)), op=MPI.MAX)
if comm.Get_rank() == 0:
    print(f"{slowest:.9f}")

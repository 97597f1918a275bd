"""Three ranks whose stall watches measured different bounds: rank 0 a long one (its intervals
include the checkpoints it writes), ranks 1 and 2 the stall_timeout. Rank 1 then falls silent
(its watch closed, as a frozen process's would answer nobody) and rank 2's bound passes first;
the job must still end with rank 0's line naming rank 1, not with rank 2's exit alone."""

import os
import socket
import time

from dynalloc.runtime.common.stall import StallWatch
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
identities = comm.allgather((socket.gethostname(), os.getpid()))
watch = StallWatch(comm, identities, 1.0, lambda: None, lambda: None)
if rank == 0:
    with watch.watching():
        time.sleep(1.5)  # rank 0's longest interval: its own bound is 15 s
        watch.beat(1)
comm.Barrier()
with watch.watching():
    time.sleep(0.05)  # the others' longest: their bound is the stall_timeout, 1 s
    watch.beat(1)
    if rank == 1:
        watch.close()
        time.sleep(60)  # silent; the launcher ends it with the job
    comm.Barrier()

"""Where a rank computes: its cores and its framework's compute threads.

`dynalloc train` pins each rank to `threads_per_rank` cores (`pin_cores`) before its framework
loads, so that the framework's threads inherit the mask: ranks sharing a node then never share
a core, and their times measure their own speed. A user's own loop under a bare `mpiexec` has
loaded its framework already, with as many compute threads as the node has cores in every rank:
the ranks thrash, their times wander, and so do the shares of identical ranks. So a
DynamicBatch places its process itself when nothing else did (`place_process`): every thread
of it pinned (Linux keeps a mask per thread, and the framework's threads exist by then) and the
framework's compute threads set. A launcher's own binding (`mpiexec -bind-to core`, `srun
--cpu-bind=cores`) is left as it is.
"""

import contextlib
import os

from dynalloc.launcher import local_size


def pin_to_core(rank, threads=1):
    """Pin this process to `threads` allowed cores from `rank * threads` on (wrapping around);
    returns the first, where contention burners go."""
    cores = sorted(os.sched_getaffinity(0))
    mine = [cores[(rank * threads + i) % len(cores)] for i in range(threads)]
    os.sched_setaffinity(0, set(mine))
    return mine[0]


def pin_rank(config, rank):
    """Pin this rank as the run config asks (`pin_cores`, `threads_per_rank`), before MXNet
    starts its threads, which inherit the mask; returns the core burners go to, or None."""
    if not config["pin_cores"]:
        return None
    return pin_to_core(rank, config["threads_per_rank"])


def place_process(rank, threads, set_threads):
    """Pin every thread of this process as `pin_to_core(rank, threads)` pins one, and set the
    framework's compute threads (`set_threads(n)`), when other ranks share this node and no one
    has pinned this process (it may run on every core it is allowed). Returns whether it did."""
    allowed = os.sched_getaffinity(0)
    if local_size() < 2 or any(os.sched_getaffinity(t) != allowed for t in _threads()):
        return False
    cores = sorted(allowed)
    mine = {cores[(rank * threads + i) % len(cores)] for i in range(threads)}
    if mine == allowed:
        return False
    for thread in _threads():
        with contextlib.suppress(ProcessLookupError):  # the thread ended meanwhile
            os.sched_setaffinity(thread, mine)
    set_threads(threads)
    return True


def _threads():
    return [int(t) for t in os.listdir("/proc/self/task")]

"""The process group of a PyTorch run, from whatever started its ranks.

Under `torchrun` (the ecosystem's launcher: elastic rendezvous, a failed worker ends the group)
the environment says everything and `init_process_group` reads it (`env://`). Under `mpiexec`
or `srun`, which start the ranks of `dynalloc train` for MXNet too, the launcher gives rank and
size only: rank 0 then opens the group's store on a free port and tells the others through MPI,
the one channel such a launcher guarantees. Its address is `MASTER_ADDR` when set, the loopback
when every rank is on one node, and otherwise the first address of its host name.
"""

import atexit
import contextlib
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist

from dynalloc.errors import DynallocError
from dynalloc.launcher import launcher_rank, launcher_size, local_size

TIMEOUT = datetime.timedelta(minutes=10)  # a rank may still be loading while others wait
LEAVING = datetime.timedelta(seconds=30)  # the ranks' wait for each other at exit


def init_process_group(backend=None):
    """Join the default process group (once; later calls return it); returns (rank, size).
    `backend`: gloo on CPU, NCCL where CUDA is, unless given."""
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} <= os.environ.keys():
            dist.init_process_group(backend, timeout=TIMEOUT)
        else:
            rank, size = launcher_rank(), launcher_size()
            store = _store(rank, size)
            dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                                    timeout=TIMEOUT)  # fmt: skip
        # Left to the interpreter's exit, the group's threads outlive it: "terminate called
        # without an active exception" under mpiexec.
        atexit.register(_leave)
    return dist.get_rank(), dist.get_world_size()


def _leave():
    """Leave the group at exit, together: a rank that destroyed its gloo group while a peer
    still finished the last collective ended that peer with "terminate called without an
    active exception" (3 ranks under torchrun, 5 of 24 test runs here). The barrier
    has a timeout, and an exit by an uncaught exception skips it, so that a failing rank
    does not wait for peers that will never come."""
    if not dist.is_initialized():
        return
    if dist.get_backend() == dist.Backend.GLOO and not hasattr(sys, "last_value"):
        with contextlib.suppress(RuntimeError):
            dist.monitored_barrier(timeout=LEAVING)
    dist.destroy_process_group()


def _store(rank, size):
    """The group's store: rank 0's, on a free port (or MASTER_PORT), its address sent to the
    others through MPI; a failure on rank 0 reaches every rank as the same one line."""
    if size == 1:
        return dist.HashStore()
    from mpi4py import MPI  # only under an MPI launcher

    store, found = None, (None, None, None)
    if rank == 0:
        try:
            address = os.environ.get("MASTER_ADDR") or (
                "127.0.0.1" if local_size() == size else _host_address()
            )
            port = int(os.environ.get("MASTER_PORT", 0))
            store = dist.TCPStore(
                address, port, size, is_master=True, timeout=TIMEOUT, wait_for_workers=False
            )
            found = (address, store.port, None)
        except (DynallocError, RuntimeError, ValueError) as error:
            found = (None, None, f"rank 0 could not open the process group's store: {error}")
    address, port, error = MPI.COMM_WORLD.bcast(found, root=0)
    if error:
        raise DynallocError(error)
    if store is None:
        store = dist.TCPStore(address, port, size, is_master=False, timeout=TIMEOUT)
    return store


def _host_address():
    name = socket.gethostname()
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        found = set()
    usable = sorted(a for a in found if not a.startswith("127."))
    if not usable:
        raise DynallocError(
            f"rank 0's host {name!r} has no address the other nodes could reach: set "
            "MASTER_ADDR to one, or launch with torchrun"
        )
    return usable[0]

"""The few collectives a recorded run needs besides the gradients' (set-up agreement, rows to
rank 0, the checkpoint's state, barriers), as mpi4py's lower-case methods name them, over
torch.distributed's object collectives on a gloo group: so that the Recorder, the stall watch
and the failure handling run unchanged on ranks that torchrun started and MPI never saw."""

import os

import torch.distributed as dist


class TorchComm:
    """An mpi4py-like communicator over a gloo process group (the default one when it is
    gloo's, a gloo group beside it otherwise: NCCL carries tensors on GPUs only)."""

    def __init__(self):
        on_cpu = dist.get_backend() == dist.Backend.GLOO
        self.group = None if on_cpu else dist.new_group(backend="gloo")

    def Get_rank(self):  # noqa: N802 - mpi4py's names
        return dist.get_rank()

    def Get_size(self):  # noqa: N802
        return dist.get_world_size()

    def bcast(self, obj, root=0):
        box = [obj]
        dist.broadcast_object_list(box, src=root, group=self.group)
        return box[0]

    def allgather(self, obj):
        gathered = [None] * self.Get_size()
        dist.all_gather_object(gathered, obj, group=self.group)
        return gathered

    def gather(self, obj, root=0):
        gathered = [None] * self.Get_size() if self.Get_rank() == root else None
        dist.gather_object(obj, gathered, dst=root, group=self.group)
        return gathered

    def Barrier(self):  # noqa: N802
        dist.barrier(group=self.group)

    def Abort(self, code):  # noqa: N802
        """End this rank at once: torchrun, mpiexec or srun then ends the others."""
        os._exit(code)

"""PyTorch integration: the same few lines in a user's own loop as `DynamicBatch` for Gluon.

    rank, ranks = init_process_group()         # under torchrun, mpiexec or srun
    dyn = DynamicBatch(model, optimizer, dataset_size=len(train_x), global_batch=512,
                       policy="adaptive", seed=0)
    for epoch in range(epochs):
        for step in dyn.epoch(epoch):
            x, y = train_x[step.indices], train_y[step.indices]
            with step.compute():               # timed: forward + backward of this share
                loss = loss_fn(model(x), y)    # the mean over the share (PyTorch's default)
                loss.backward()
            step.finish(loss)                  # weighted all-reduce, optimizer.step, new shares

`model` may be a plain module or a `DistributedDataParallel`. A plain module's gradients live in
one tensor (each parameter's `.grad` a view of it): after the backward pass it is weighted by
the rank's share `b_r / B` and summed over the ranks in one all-reduce, which gives the gradient
of the mean loss over the global batch whatever the shares. Under DDP the share-weighted hook
(`runtime.torch.hook`) does the same bucket by bucket, overlapped with the backward pass, and
the rank's compute time ends when its last bucket is ready, before it waits for the others.
Either way the optimizer is the user's own, stepped as it is; the gradients are zeroed after
each step.
"""

import math
import os
import time

import torch
import torch.distributed as dist
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.parallel import DistributedDataParallel

from dynalloc.errors import DynallocError, SharedError
from dynalloc.runtime.common.allocation import RANK_VALUES, Allocation, folded
from dynalloc.runtime.common.heap import hold_freed_memory
from dynalloc.runtime.torch.hook import ShareWeight, share_weighted_hook
from dynalloc.runtime.torch.step import Step


class DynamicBatch(Allocation):
    """Hands each rank its samples per iteration, times its compute, sums the share-weighted
    gradients, steps the optimizer and feeds the allocation policy (`Allocation`: the policy,
    slowdown, sampler and rows). The process group must be initialised
    (`runtime.torch.init_process_group`); `group` is the one to use, the default otherwise.
    `scheduler`, a learning-rate scheduler, steps after every optimizer step. `scaler`, a
    `torch.amp.GradScaler` for mixed precision (or `dyn.scaler = scaler` before the first
    step): the optimizer then steps through `scaler.step(optimizer)` and `scaler.update()`,
    which skip the step where a gradient overflowed, on every rank alike (an overflow summed
    into the exchange is every rank's). A network with BatchNorm keeps at least 8 samples per
    rank. A model on the CPU keeps the memory its iterations free in the process
    (`runtime.common.heap`); `hold_memory=False` leaves the C library's malloc as it is."""

    Step = Step

    def __init__(
        self, model, optimizer, dataset_size, global_batch, *, policy="adaptive", seed=0,
        min_share=1, max_share=None, drop_last=False, slowdown=None, sampler=None, group=None,
        scheduler=None, scaler=None, pin_cores=True, threads_per_rank=1, hold_memory=True,
    ):  # fmt: skip
        if not dist.is_initialized():
            raise DynallocError(
                "initialise the process group before DynamicBatch: "
                "dynalloc.runtime.torch.init_process_group()"
            )
        self.model, self.optimizer, self.scheduler, self.group = model, optimizer, scheduler, group
        self.scaler = scaler
        self.ddp = isinstance(model, DistributedDataParallel)
        self.module = model.module if self.ddp else model
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        if not self.params:
            raise DynallocError("the model has no parameter that requires a gradient")
        self.device = self.params[0].device
        if hold_memory and self.device.type == "cpu":
            hold_freed_memory()
        # The small per-iteration gathers go over gloo on the CPU, whatever carries gradients.
        on_cpu = dist.get_backend(group) == dist.Backend.GLOO
        self.meta = group if on_cpu else dist.new_group(backend="gloo")
        self.weight, self.overlapped_s, self.stepping = 1.0, 0.0, False
        optimizer.register_step_pre_hook(self._refuse_a_step_of_its_own)
        self.current = None  # the step under way
        self.seed = None  # the backward pass's starting gradient (`seed_gradient`)
        if self.ddp:  # DDP has broadcast rank 0's parameters already
            self.hook = ShareWeight(group, values=self._bucket_values)
            model.register_comm_hook(self.hook, share_weighted_hook)
        else:
            for tensor in [*self.module.parameters(), *self.module.buffers()]:
                dist.broadcast(tensor.data, src=0, group=group)  # all ranks start from rank 0
            self.gradients = self._gradients_in_one_tensor()
        super().__init__(
            dist.get_rank(group), dist.get_world_size(group), dataset_size, global_batch,
            policy=policy, seed=seed, min_share=min_share, max_share=max_share,
            drop_last=drop_last, slowdown=slowdown, sampler=sampler,
            batchnorm=any(isinstance(m, _BatchNorm) for m in self.module.modules()),
            # A GPU rank's host threads (launches, autograd, NCCL) need more than one core.
            pin_cores=pin_cores and self.device.type == "cpu", threads_per_rank=threads_per_rank,
        )  # fmt: skip
        if self.ddp:  # as placed now, by us or by the launcher
            self.hook.one_core = self.device.type == "cpu" and len(os.sched_getaffinity(0)) == 1

    def _refuse_a_step_of_its_own(self, optimizer, args, kwargs):
        """step.finish() steps the optimizer: a script's own optimizer.step() (a DDP script's,
        left in place) would apply each iteration's gradients twice, training silently
        otherwise. Every rank's script calls it at the same point."""
        if not self.stepping:
            raise SharedError(
                "optimizer.step() called besides step.finish(loss), which steps the optimizer "
                "itself: remove your optimizer.step() (and zero_grad())"
            )

    def _bucket_values(self, computed):
        """What the last bucket carries: this rank's `RANK_VALUES`, `computed` its compute
        seconds; its loss where `step.backward(loss)` took it, NaN otherwise (`_finish`)."""
        step = self.current
        busy = step.timings(computed)
        return [*busy, step.backward_loss, float(self.stop_requested)]

    def seed_gradient(self, loss, weight):
        """`weight` as the gradient a backward pass from `loss` starts from: no product of the
        loss and the weight in the graph, whose forward and backward nodes cost about 12 us an
        iteration on a CPU (the cost ladder). One 0-d tensor, filled in place: on a GPU that is
        a launch, where a new tensor from a Python number would be a copy from the host."""
        seed = self.seed
        if seed is None or (seed.dtype, seed.device) != (loss.dtype, loss.device):
            seed = self.seed = torch.empty((), dtype=loss.dtype, device=loss.device)
        return seed.fill_(weight)

    def weigh(self, weight):
        """This rank's gradients weigh `weight` (`b_r / B`) in the iteration under way."""
        self.weight = weight
        if self.ddp:
            self.hook.weight = weight

    def _gradients_in_one_tensor(self):
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) > 1:
            raise DynallocError(f"the parameters mix dtypes {sorted(map(str, dtypes))}")
        size = sum(p.numel() for p in self.params)
        gradients = torch.zeros(size + len(RANK_VALUES) * dist.get_world_size(self.group),
                                dtype=dtypes.pop(), device=self.device)  # fmt: skip
        self.weighted, self.tail = gradients[:size], gradients[size:]  # the ranks' values
        self.views, start = [], 0
        for p in self.params:
            self.views.append(gradients[start : start + p.numel()].view_as(p))
            start += p.numel()
        self._bind()
        return gradients

    def _bind(self):
        """Make each `.grad` the view of the one gradient tensor again, keeping its values:
        `optimizer.zero_grad()` sets gradients to None by default, and the next backward pass
        then gives a parameter a tensor of its own."""
        for p, view in zip(self.params, self.views, strict=True):
            if p.grad is not view:
                if p.grad is None:
                    view.zero_()
                else:
                    view.copy_(p.grad)
                p.grad = view

    def wait_for_device(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def set_threads(self, threads):
        torch.set_num_threads(threads)

    def gather(self, values):
        """Over the gloo group of the small gathers, whatever carries the gradients."""
        mine = torch.tensor(values, dtype=torch.float64)
        gathered = [torch.empty(len(values), dtype=torch.float64) for _ in range(self.ranks)]
        dist.all_gather(gathered, mine, group=self.meta)
        return torch.stack(gathered).numpy()

    def save_state(self):
        return [b.detach().clone() for b in self.module.buffers() if b.is_floating_point()]

    def restore_state(self, saved):
        buffers = [b for b in self.module.buffers() if b.is_floating_point()]
        for buffer, values in zip(buffers, saved, strict=True):
            buffer.data.copy_(values)

    def zero_gradients(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def average_state(self):
        """Average the floating-point buffers (BatchNorm running statistics, which each rank
        gathers from its own samples) over the ranks, so that every rank evaluates and saves
        the same model. Call it before evaluating or saving."""
        for buffer in self.module.buffers():
            if buffer.is_floating_point():
                dist.all_reduce(buffer.data, group=self.group)
                buffer.data.div_(self.ranks)

    def _exchange(self, step, loss):
        """The ranks' values travel with the gradients: a module's in the one all-reduce of its
        gradients; under DDP in the last bucket, but for a loss that `step.backward(loss)` did
        not take, which goes once the backward pass is over, in an all-reduce of its own
        overlapped with the optimizer's step (every rank sees the same block, so all agree):
        returned unfinished, as (the request, the losses) where the rows' losses belong."""
        if not self.ddp:
            began = time.perf_counter()
            self._bind()
            if self.weight != 1.0:
                self.weighted.mul_(self.weight)
            mine = folded(self.own_values(step, loss), self.rank, self.ranks)
            self.tail.copy_(torch.tensor(mine))
            dist.all_reduce(self.gradients, group=self.group)
            self.wait_for_device()
            return time.perf_counter() - began, self.tail.view(self.ranks, -1).tolist(), None
        block = self.hook.gathered()
        if block is None:
            raise SharedError(
                "the step ended before any backward pass through the DDP model: call "
                "loss.backward() before step.synchronize(loss) or step.finish(loss)"
            )
        summing = None
        if any(math.isnan(row[2]) for row in block):
            losses = torch.zeros(self.ranks, dtype=torch.float64)
            losses[self.rank] = loss
            summing = dist.all_reduce(losses, group=self.meta, async_op=True), losses
        return self.overlapped_s, block, summing  # the backward pass's wait for the others

    def _finish(self, step, sync_s, rows, summing):
        self.stepping = True
        try:
            if self.scaler is None:
                self.optimizer.step()
            else:
                self.scaler.step(self.optimizer)
                self.scaler.update()
        finally:
            self.stepping = False
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=self.ddp)  # a module's .grad are views: kept
        if summing is not None:
            request, losses = summing
            request.wait()
            for row, value in zip(rows, losses.tolist(), strict=True):
                row[2] = value
        return self.settle(step, sync_s, rows)

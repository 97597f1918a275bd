"""One iteration of one rank under PyTorch (`runtime.torch.batch.DynamicBatch` hands them out):
its compute timed, under DDP up to the rank's last bucket, its loss checked to be the mean over
the share, and the backward pass weighted by the share."""

import contextlib
import math
import time

import torch

from dynalloc.errors import SharedError
from dynalloc.runtime.common.step import Step as BaseStep


class Step(BaseStep):
    """One iteration of one rank under PyTorch: `synchronize` and `finish` take the mean loss of
    the share. After `synchronize`, every `.grad` holds the gradient of the global batch's mean
    loss (under DDP it does once the backward pass is over, as with DDP alone)."""

    def __init__(self, owner, epoch, batch, shares, indices, next_epoch):
        super().__init__(owner, epoch, batch, shares, indices, next_epoch)
        owner.weigh(self.share / self.size)
        owner.current = self
        self.backward_loss = float("nan")  # the loss step.backward(loss) took, if it did
        if owner.ddp:  # timed from here where the loop times no compute()
            owner.hook.start(self.slowdown)

    @contextlib.contextmanager
    def compute(self):
        """Time the enclosed forward and backward. Under DDP the backward pass also waits for
        the other ranks' buckets: the time ends when this rank's last bucket was ready (an
        emulated slowdown delays each bucket, `hook.SlowBuckets`)."""
        if not self.owner.ddp:
            with super().compute():
                yield self
            return
        self.owner.hook.start(self.slowdown)
        yield self
        self._bucket_times()

    def time_if_untimed(self):
        if self.owner.ddp and math.isnan(self.compute_s):
            self._bucket_times()
        super().time_if_untimed()

    def _bucket_times(self):
        """Compute until this rank's last bucket was ready; the rest of the backward pass was
        the wait for the other ranks' buckets."""
        hook = self.owner.hook
        self.owner.wait_for_device()
        ended = time.perf_counter()
        self.compute_s = hook.computed(ended)  # no bucket: no backward pass to wait in
        self.owner.overlapped_s = ended - (hook.last_ready or ended)

    def own_loss(self, loss, call):
        """`loss`: the mean loss over this rank's share, whose gradient `backward()` gave: each
        rank's is weighted by its share, so a summed loss would be weighted wrongly, and
        training silently worse."""
        return mean_loss(loss, call)

    def backward(self, loss):
        """`loss.backward()`, its value noted first: under DDP it then travels in the last
        bucket with this rank's times. After a `loss.backward()` of the loop's own, the ranks'
        losses need an all-reduce of their own once the backward pass is over (overlapped with
        the optimizer's step; about a millisecond an iteration on a CPU). The backward pass
        starts from the rank's weight `b_r / B` where it would start from 1: its gradients come
        out weighted, with no pass of their own over them (about 0.6 ms on bench-overhead's
        largest model). With a `GradScaler` (`DynamicBatch(scaler=)`), the loss is scaled by it
        first."""
        self.backward_loss = mean_loss(loss, "backward")
        self.owner.weigh(1.0)  # the gradients are weighted already
        scaler = self.owner.scaler  # mixed precision: the loss scaled, as the scaler expects
        scaled = loss if scaler is None else scaler.scale(loss)
        scaled.backward(self.owner.seed_gradient(loss, self.share / self.size))


def mean_loss(loss, call):
    """`loss` as a float, once checked to be the mean over this rank's share (a 0-d tensor)."""
    if not (torch.is_tensor(loss) and loss.dim() == 0):
        shape = tuple(loss.shape) if torch.is_tensor(loss) else type(loss).__name__
        raise SharedError(
            f"step.{call}() needs the mean loss over this rank's share (a 0-d tensor, as "
            f"PyTorch's losses return it by default), got {shape}"
        )
    return float(loss.detach())

"""The DDP communication hook that weights each rank's gradients by its share of the batch.

DistributedDataParallel averages the ranks' gradients, which is the gradient of the mean loss
over the global batch only when every rank had as many samples. With shares `b_r` of a global
batch `B`, each rank's gradient of its mean loss weighted by `b_r / B` and summed is that
gradient exactly, whatever the shares: the hook does that to every bucket, so users of DDP keep
it, and its overlap of the all-reduce with the backward pass.

    model = DistributedDataParallel(net)
    dyn = DynamicBatch(model, optimizer, ...)   # registers the hook with its own state
"""

import time

import torch
import torch.distributed as dist


class SlowBuckets:
    """A rank emulated `factor` times slower under DDP (a scenario's `slowdown`): each bucket
    goes to the all-reduce when a device that much slower would have had it ready, its time
    since the iteration began stretched by `factor`, so that DDP's overlap is kept. Sleeping
    after the backward pass, as a plain module's rank does, would come after DDP had already
    exchanged the buckets: the delay would follow the exchange instead of holding it up, and
    the others would not wait for it. Call `start(factor)` as the forward pass begins."""

    def __init__(self):
        self.factor, self.began, self.slept = 1.0, None, 0.0

    def start(self, factor):
        self.factor, self.began, self.slept = factor, time.perf_counter(), 0.0

    def hold(self, device=None):
        """Sleep until this bucket's emulated ready time: `factor` times the time computed.
        `device`: the bucket's. On a GPU the hook runs once the backward pass has queued the
        bucket's kernels, not run them: the stream is waited for first, or the time stretched
        would be the launches'."""
        if self.began is None or self.factor <= 1.0:
            return
        if device is not None and device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        computed = time.perf_counter() - self.began - self.slept
        late = (self.factor - 1.0) * computed - self.slept
        if late > 0:
            time.sleep(late)
            self.slept += late


class ShareWeight(SlowBuckets):
    """The hook's state: this rank's weight `b_r / B` for the iteration under way, and when its
    last bucket was ready (its own backward done, before it waits for the others)."""

    def __init__(self, group=None):
        super().__init__()
        self.group, self.weight, self.last_ready = group, 1.0, None

    def start(self, factor):
        super().start(factor)
        self.last_ready = None


def share_weighted_hook(state, bucket):
    """Multiply the bucket by `state.weight`, then sum it over the ranks (asynchronously, as DDP
    expects of a hook). On the last bucket of the backward pass, note the time first: what the
    rank computed is done then, whatever the others still compute. On a GPU that is when its
    compute stream has drained; not the whole device, whose NCCL kernels for the earlier
    buckets wait for the other ranks."""
    tensor = bucket.buffer()
    state.hold(tensor.device)
    tensor.mul_(state.weight)
    if bucket.is_last():
        if tensor.is_cuda:
            torch.cuda.current_stream(tensor.device).synchronize()
        state.last_ready = time.perf_counter()
    work = dist.all_reduce(tensor, group=state.group, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])

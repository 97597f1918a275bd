"""The DDP communication hook that weights each rank's gradients by its share of the batch.

DistributedDataParallel averages the ranks' gradients, which is the gradient of the mean loss
over the global batch only when every rank had as many samples. With shares `b_r` of a global
batch `B`, each rank's gradient of its mean loss weighted by `b_r / B` and summed is that
gradient exactly, whatever the shares: the hook does that to every bucket, so users of DDP keep
it, and its overlap of the all-reduce with the backward pass.

    model = DistributedDataParallel(net)
    dyn = DynamicBatch(model, optimizer, ...)   # registers the hook with its own state
"""

import contextlib
import threading
import time

import torch
import torch.distributed as dist

from dynalloc.runtime.common.allocation import folded


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
    """The hook's state: this rank's weight `b_r / B` for the iteration under way, when its
    last bucket was ready (its own backward done, before it waits for the others), and what
    travels with that bucket: `values(computed)` gives this rank's few numbers (its times),
    which the hook writes into its row of a ranks x len block appended to the bucket, so that
    one all-reduce also gathers every rank's: `gathered()`, once the backward pass is over.
    Without `values` (a user's own DDP run of the hook) the buckets go alone.

    `one_core`: the rank computes on the CPU pinned to one core, where the process's other
    threads run only by taking that core from the backward pass. Gloo's threads spin there
    while they wait for the other ranks' earlier buckets: 4-5 ms or more in a tenth of the
    iterations of bench-overhead's 10 ms model, whose forward and backward pass take 6 ms
    (benchmarks/ddp_spin.py).
    Counted as compute, that wait made equal ranks look up to 50% apart and moved their shares
    after the noise. So the compute leaves out what the threads that Python did not start took
    (`stolen`), at most the time the backward pass neither ran nor slept. The other Python
    threads' time stays counted: a read-ahead's decoders on the same core slow the rank's
    compute as much as they decode for its share."""

    def __init__(self, group=None, values=None):
        super().__init__()
        self.group, self.weight, self.last_ready, self.values = group, 1.0, None, values
        self.sent = False  # whether the last bucket went with the values this iteration
        self.rank, self.ranks = dist.get_rank(group), dist.get_world_size(group)
        # The process group's own allreduce, not `dist.all_reduce`: its checks cost as much as
        # the rest of the last bucket's hook on a small model (DDP's C++ hook skips them too).
        self.process_group = group or dist.group.WORLD
        self.joined, self.head, self.block = None, None, None  # the last bucket and the block
        self.bucket = None  # DDP's last bucket that `joined` was made for
        self.rows = None  # the block as numpy, where it lives on the CPU: written in place
        self.one_core, self.cpu_began, self.stolen = False, None, 0.0

    def start(self, factor):
        super().start(factor)
        self.last_ready, self.sent, self.stolen = None, False, 0.0
        if self.one_core:
            self.cpu_began = cpu_seconds()

    def ready(self):
        """Note that this rank's last bucket is ready: its compute is done."""
        self.last_ready = time.perf_counter()
        if self.one_core and self.cpu_began is not None:
            began = self.cpu_began
            process, mine, python = cpu_seconds(began[2])  # the threads there when it began
            ran = mine - began[1]
            python_ran = sum(python[t] - seconds for t, seconds in began[2].items() if t in python)
            others = process - began[0] - ran - python_ran
            idle = self.last_ready - self.began - ran - self.slept
            self.stolen = max(0.0, min(others, idle))

    def computed(self, ended):
        """Seconds this rank computed since `start`: until its last bucket was ready, less what
        its other threads took from it (`one_core`); until `ended` where no bucket went; NaN
        where no step started it (the hook alone)."""
        if self.began is None:
            return float("nan")
        if self.last_ready is None:
            return ended - self.began
        return self.last_ready - self.began - self.stolen

    def gathered(self):
        """Every rank's values, one list of floats per rank, or None where no last bucket went
        (no backward pass). DDP's backward pass returns once every bucket is exchanged."""
        if not self.sent:
            return None
        if self.rows is not None:
            return self.rows.reshape(self.ranks, -1).tolist()
        return self.block.view(self.ranks, -1).tolist()

    def join(self, tensor):
        """The last bucket weighted, then this rank's values in its row of the block: one
        tensor (kept from one iteration to the next, with its views, while DDP keeps the
        bucket's) and one pass over the bucket; returns it and the view of the bucket's part."""
        values = self.values(self.computed(self.last_ready))
        if tensor is not self.bucket:  # the first iteration, or DDP has rebuilt its buckets
            size = tensor.numel()
            self.joined = torch.empty(size + len(values) * self.ranks, dtype=tensor.dtype,
                                      device=tensor.device)  # fmt: skip
            self.head, self.block = self.joined[:size], self.joined[size:]
            on_cpu = tensor.device.type == "cpu" and tensor.dtype != torch.bfloat16  # numpy's
            self.rows = self.block.numpy() if on_cpu else None
            self.bucket = tensor
        if self.weight == 1.0:  # weighted in the backward pass already: a copy is cheaper
            self.head.copy_(tensor)
        else:
            torch.mul(tensor, self.weight, out=self.head)
        block = folded(values, self.rank, self.ranks)
        if self.rows is not None:
            self.rows[:] = block
        else:
            self.block.copy_(torch.tensor(block))
        self.sent = True
        return self.joined, self.head


def cpu_seconds(native_ids=None):
    """(CPU seconds of the whole process, of this thread, of each other Python thread by native
    id): of those in `native_ids` where given (the window's end reads only the threads its start
    found, without enumerating them again, twice an iteration on the hot path). Linux gives any
    thread of the process a CPU clock: `~tid << 3 | 6` is the kernel's
    MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)."""
    if native_ids is None:
        me = threading.get_ident()
        native_ids = [thread.native_id for thread in threading.enumerate()
                      if thread.ident != me and thread.native_id is not None]  # fmt: skip
    python = {}
    for native_id in native_ids:
        with contextlib.suppress(OSError):  # it ended meanwhile
            python[native_id] = time.clock_gettime((~native_id << 3) | 6)
    return time.process_time(), time.thread_time(), python


def share_weighted_hook(state, bucket):
    """Multiply the bucket by `state.weight`, then sum it over the ranks (asynchronously, as DDP
    expects of a hook). On the last bucket of the backward pass, note the time first: what the
    rank computed is done then, whatever the others still compute. On a GPU that is when its
    compute stream has drained; not the whole device, whose NCCL kernels for the earlier
    buckets wait for the other ranks. The last bucket carries the ranks' values
    (`ShareWeight`)."""
    tensor = bucket.buffer()
    state.hold(tensor.device)
    last = bucket.is_last()
    if last:
        if tensor.is_cuda:
            torch.cuda.current_stream(tensor.device).synchronize()
        state.ready()
        if state.values is not None:
            joined, head = state.join(tensor)
            return summed(state.process_group.allreduce([joined]), head, last)
    if state.weight != 1.0:  # 1: weighted in the backward pass (`Step.backward`), or 1 rank
        tensor.mul_(state.weight)
    return summed(state.process_group.allreduce([tensor]), tensor, last)


def summed(work, result, last):
    """DDP's future of the bucket `result` once `work`, its all-reduce, is done. A CPU's last
    bucket is waited for here, its future made done: a Python callback on the all-reduce's
    future (`then`) costs about 40 us an iteration on a CPU (the cost ladder,
    benchmarks/cost_ladder.py), and after the last bucket nothing of the backward pass is
    left to overlap with. Earlier buckets keep the callback, and the overlap; so does a GPU's
    last, where a wait would only order the streams."""
    if last and result.device.type == "cpu":
        work.wait()
        future = torch.futures.Future()
        future.set_result(result)
        return future

    def done(exchanged):
        exchanged.value()  # raises where the all-reduce failed
        return result

    return work.get_future().then(done)

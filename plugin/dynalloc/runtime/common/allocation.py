"""What every framework's DynamicBatch shares: the policy and the sampler, the steps of an epoch,
and the few numbers of each rank (`RANK_VALUES`) that end an iteration, which travel in the
gradient exchange itself: each rank writes its own into its row of a ranks x 4 block of zeros
appended to the gradients, and the exchange's sum leaves every rank's row on every rank.

`runtime.mxnet.gluon.DynamicBatch` (MXNet, MPI) and `runtime.torch.DynamicBatch` (PyTorch,
torch.distributed) add the gradients, the device's clock and the collectives; numpy alone here,
so that either environment imports it.
"""

import math
import operator
import time
from collections.abc import Mapping

from dynalloc.core.partition import GlobalBatchSampler
from dynalloc.core.policies import make_policy
from dynalloc.core.policy import Policy
from dynalloc.core.shares import batchnorm_floor
from dynalloc.core.warm import fastest_pass, first_probe, probe_costs, second_probe
from dynalloc.errors import DynallocError, SharedError
from dynalloc.experiment.warm_spec import PROBE, check_warm_start
from dynalloc.experiment.warm_start import warm_costs
from dynalloc.rundir import Row
from dynalloc.runtime.common.placement import place_process
from dynalloc.runtime.common.share_sampler import ShareSampler
from dynalloc.runtime.common.timing import ComputeTimer

RANK_VALUES = ("busy", "balanced", "loss", "stop")  # a rank's numbers, every iteration


def folded(values, rank, ranks):
    """What rank `rank` writes into the block appended to the gradients (len(values) x `ranks`
    numbers): `values` in its own row, zeros in the others', so that summed over the ranks the
    block holds every rank's values. A Python list, written in one assignment."""
    block = [0.0] * (len(values) * ranks)
    block[rank * len(values) : (rank + 1) * len(values)] = values
    return block


class Allocation:
    """One rank's share of every global batch, and the bookkeeping of each iteration.

    policy: a name (`dynalloc.core.policies`), a mapping of `name` and parameters as in a run
        config, or a `Policy` made for these ranks and global batch.
    slowdown: optional `iteration -> factor` that stretches this rank's compute (experiments).
    sampler: the run's `GlobalBatchSampler`, when the caller has built it already.
    batchnorm: whether the network normalises over each rank's samples; it then gets at least
        8 samples per rank whatever `min_share` says (`core.shares.batchnorm_floor`), as far as
        the global batch and `max_share` allow.
    pin_cores, threads_per_rank: as in a run config. Where other ranks share this node and
        nothing pinned this process (a bare `mpiexec` of a user's loop), every thread of it is
        pinned to its `threads_per_rank` cores and the framework computes with that many threads,
        as `dynalloc train` places its ranks (`runtime.common.placement`); False leaves both.
    `rows` collects this rank's `rundir.Row` of every iteration.
    """

    Step = None  # the framework's step (a `Step` subclass), set by the subclass

    def __init__(
        self, rank, ranks, dataset_size, global_batch, *, policy, seed, min_share, max_share,
        drop_last, slowdown, sampler, batchnorm, pin_cores, threads_per_rank,
    ):  # fmt: skip
        self.rank, self.ranks, self.global_batch = rank, ranks, global_batch
        if pin_cores:
            place_process(rank, threads_per_rank, self.set_threads)
        warm = None
        if isinstance(policy, Mapping) and "warm_start" in policy:
            warm = check_warm_start(policy["warm_start"], policy.get("name"), ranks)
            policy = {k: v for k, v in policy.items() if k != "warm_start"}
        try:
            if batchnorm:
                min_share = batchnorm_floor(ranks, global_batch, min_share, max_share)
            self.policy = (
                policy
                if isinstance(policy, Policy)
                else make_policy(policy, ranks, global_batch, min_share, max_share)
            )
            self.sampler = sampler or GlobalBatchSampler(
                dataset_size, global_batch, seed, drop_last, min_share, ranks
            )
        except ValueError as error:
            raise DynallocError(str(error)) from None
        if (self.policy.ranks, self.policy.global_batch) != (ranks, global_batch):
            raise DynallocError(
                f"the policy was made for {self.policy.ranks} ranks and a global batch of "
                f"{self.policy.global_batch}, not {ranks} and {global_batch}"
            )
        if (self.sampler.dataset_size, self.sampler.global_batch) != (dataset_size, global_batch):
            raise DynallocError(
                f"the sampler was made for {self.sampler.dataset_size} samples in batches of "
                f"{self.sampler.global_batch}, not {dataset_size} in batches of {global_batch}"
            )
        self.slowdown = slowdown
        self.probing = warm == PROBE  # the policy's costs come from `probe` before iteration 0
        self.probe_s = 0.0
        if warm not in (None, PROBE):
            costs = warm_costs(warm, ranks)
            self.policy.warm(costs["intercept_s"], costs["per_sample_s"], costs.get("noise"))
        self.iteration = 0
        self.rows = []
        self.stop_requested = False  # set it on any rank: all agree in the next finish()
        self.stopping = False
        self.share_sampler = None

    @property
    def shares(self):
        return self.policy.shares

    def probe(self, forward_backward):
        """Warm-start the policy (`policy.warm_start: probe`): time `forward_backward(n)`, a
        forward and backward pass of `n` of this rank's samples, on every rank at two shares
        (`core.warm.first_probe`, `second_probe`: the second where the speeds the first showed
        put the rank's share; a short pass is timed again, `core.warm.fastest_pass`), and start
        from the line through those two points. A first untimed pass is the framework's
        warm-up, which the first iteration would pay otherwise. The gradients are discarded
        and the non-trainable state (BatchNorm's statistics) restored, so the training is the
        same; random draws the passes make (dropout) are the framework's to reseed. Returns its
        seconds (`probe_s`)."""
        if not self.probing or self.iteration:
            raise DynallocError(
                "probe() is for a run whose policy.warm_start is probe, before its first iteration"
            )
        began = time.perf_counter()
        first = first_probe(self.global_batch, self.ranks)
        saved = self.save_state()
        forward_backward(first)
        first_s = self.gather([self._timed(forward_backward, first)])[:, 0]
        second = second_probe(first, first_s, self.global_batch, self.policy.bounds)
        second_s = self.gather([self._timed(forward_backward, int(second[self.rank]))])[:, 0]
        self.restore_state(saved)
        self.zero_gradients()
        self.policy.warm(*probe_costs(first, second, first_s, second_s))
        self.probing = False
        self.probe_s = time.perf_counter() - began
        return self.probe_s

    def _timed(self, forward_backward, n):
        factor = 1.0 if self.slowdown is None else float(self.slowdown(0))

        def once():
            with ComputeTimer(factor, self.wait_for_device) as timer:
                forward_backward(n)
            return timer.seconds

        return fastest_pass(once)

    def epoch(self, epoch, start=0, loader=None):
        """The steps of one epoch from its global batch `start` (a resumed run starts mid-epoch);
        each must be finished before the next is taken. With `loader`, a DataLoader built over
        `batch_sampler()`, (step, batch) pairs: the batch of the step's samples."""
        if loader is None:
            for plan in self.plan(epoch, start):
                yield self.Step(self, *plan)
        else:
            sampler = self.batch_sampler()
            sampler.set_epoch(epoch, start)
            yield from sampler.steps(loader)

    def batch_sampler(self):
        """This rank's share of every iteration as a batch sampler for the framework's own
        DataLoader (`runtime.common.share_sampler`)."""
        if self.share_sampler is None:
            self.share_sampler = ShareSampler(self)
        return self.share_sampler

    def plan(self, epoch, start):
        """(epoch, batch, shares, this rank's indices, next epoch) of each iteration of the
        epoch from global batch `start`, its shares the policy's when it is taken."""
        if self.probing:
            raise DynallocError(
                "policy.warm_start is probe: call probe(forward_backward) before the first step"
            )
        permutation = self.sampler.permutation(epoch)
        last = self.sampler.batches_per_epoch - 1
        for k in range(start, last + 1):
            shares = self.sampler.shares_for(k, self.policy.shares)
            indices = self.sampler.rank_indices(epoch, k, shares, self.rank, permutation)
            yield epoch, k, shares, indices, epoch + 1 if k == last else epoch

    def own_values(self, step, loss):
        """This rank's `RANK_VALUES` for the iteration: `step.timings()`, its mean loss and
        whether it asks to stop."""
        return [*step.timings(), loss, float(self.stop_requested)]

    def settle(self, step, sync_s, rows):
        """End the iteration once the gradients are exchanged and every rank's `own_values`
        have arrived (`rows`, one list of floats per rank): record this rank's
        row, feed the policy the next shares, and return the global batch's mean loss (the same
        number on every rank). What the policy balances is each rank's busy time, or its reads
        where they take longer (`Step.timings`). The wait is taken from the gathered busy times,
        all rounded alike to the gradients' dtype, so the slowest rank's is exactly 0."""
        # As Python floats: on a few ranks each numpy call costs more than its arithmetic, and
        # after a backward pass has evicted the caches, several times more (in-loop timing).
        busy_all, balanced, losses, stops = zip(*rows, strict=True)
        self.stopping = any(stops)
        batch_loss = sum(map(operator.mul, losses, step.counts)) / step.size
        if not math.isfinite(batch_loss):
            raise SharedError(
                f"the loss became {batch_loss} at iteration {self.iteration} "
                f"(epoch {step.epoch}); lower the learning rate"
            )
        self.rows.append(
            Row(
                iteration=self.iteration,
                epoch=step.epoch,
                rank=self.rank,
                batch_size=step.counts[self.rank],
                compute_s=step.compute_s,
                sync_s=sync_s,
                wait_s=max(busy_all) - busy_all[self.rank],
                iteration_s=time.perf_counter() - step.started,
                loss=losses[self.rank],
                slowdown=step.slowdown,
                policy=self.policy.name,
                data_s=step.data_s,
                read_s=step.read_s,
                ranks=len(step.shares),
            )
        )
        self.iteration += 1
        self.policy.observe(step.counts, balanced, self.iteration, step.next_epoch)
        return batch_loss

    def wait_for_device(self):
        """Block until the framework has really done the work enqueued so far (its calls only
        enqueue); the compute timer calls it before reading the clock."""
        raise NotImplementedError

    def set_threads(self, threads):
        """Let the framework compute with `threads` threads in this process."""
        raise NotImplementedError

    def gather(self, values):
        """Every rank's `values` (a few floats), one row per rank, as a numpy array."""
        raise NotImplementedError

    def save_state(self):
        """A copy of the non-trainable state (BatchNorm's statistics), for `restore_state`."""
        raise NotImplementedError

    def restore_state(self, saved):
        raise NotImplementedError

    def zero_gradients(self):
        raise NotImplementedError

    def _exchange(self, step, loss):
        """Sum the ranks' weighted gradients, this rank's `own_values` (`loss` its mean loss)
        travelling with them; returns what `_finish` takes: the seconds it took, every rank's
        values, and whatever else the framework's step needs."""
        raise NotImplementedError

    def _finish(self, step, sync_s, rows, *rest):
        """Step the optimizer on the exchanged gradients, then `settle`."""
        raise NotImplementedError

"""One iteration of one rank, as every framework's DynamicBatch hands it out: its samples, its
compute timer, and its end: the gradients exchanged (`synchronize`, or `finish` itself), then the
optimizer stepped and the next shares agreed (`finish`). The framework's subclass reads its
loss (`own_loss`); its DynamicBatch does the exchange and the step (`_exchange`, `_finish`)."""

import math
import time

import numpy as np

from dynalloc.runtime.common.timing import ComputeTimer, StepTimer


class Step:
    """One iteration of one rank: its sample indices, the compute timer, its end; the
    framework's subclass reads its loss (`own_loss`)."""

    def __init__(self, owner, epoch, batch, shares, indices, next_epoch):
        self.owner, self.epoch, self.batch, self.shares = owner, epoch, batch, shares
        self.indices, self.next_epoch = indices, next_epoch
        self.counts = np.asarray(shares).tolist()  # the shares as Python ints, for arithmetic
        self.size = sum(self.counts)  # samples in this global batch: B, or an epoch's last
        self.iteration = owner.iteration
        self.compute_s = float("nan")
        self.data_s = 0.0  # seconds spent getting this share's samples, if the loop measures it
        self.read_s = 0.0  # seconds the reading of those samples took, if a read-ahead hid it
        self.loss = None  # the global batch's mean loss, once finished
        self.exchanged = None  # what the framework's exchange returned, once synchronized
        self.slowdown = 1.0 if owner.slowdown is None else float(owner.slowdown(self.iteration))
        self.started = time.perf_counter()

    @property
    def share(self):
        return self.counts[self.owner.rank]

    def timings(self, compute_s=None):
        """[busy, balanced]: the rank's compute (`compute_s`, where the step's own is not
        known yet) and its wait for the samples; and what the
        policy balances, the longer of that and the samples' reading: a read-ahead that hides a
        slow read behind the compute still bounds the share the rank's reads can keep up with,
        which a rank without reads would not have (ReadAhead.read_s)."""
        busy = (self.compute_s if compute_s is None else compute_s) + self.data_s
        return [busy, max(busy, self.read_s)]

    def time_if_untimed(self):
        """Where the loop timed no `compute()` (a ported loop kept as it was), the time since
        the step began is its forward and backward, stretched by the emulated slowdown as
        `compute()` stretches it; called before the exchange."""
        if math.isnan(self.compute_s):
            timer = ComputeTimer(self.slowdown, self.owner.wait_for_device, began=self.started)
            timer.stop()
            self.compute_s = timer.seconds

    def compute(self):
        """Time the enclosed forward and backward once the device has really finished them."""
        return StepTimer(self)

    def synchronize(self, loss):
        """Exchange the gradients now rather than in `finish`, as Horovod's
        `optimizer.synchronize()` does: every rank's gradients are then the global batch's,
        for what goes between the exchange and the optimizer's step (clipping them by their
        global norm). `loss`: as `finish` takes it; `finish(loss)` then only steps."""
        self._exchange_once(loss, "synchronize")

    def finish(self, loss):
        """Exchange the gradients (unless `synchronize` did), step the optimizer, agree on the
        next shares; returns the mean loss of the global batch (the same number on every
        rank). `loss` as the framework's step says (`own_loss`)."""
        self._exchange_once(loss, "finish")
        self.loss = self.owner._finish(self, *self.exchanged)
        return self.loss

    def _exchange_once(self, loss, call):
        if self.exchanged is None:
            own = self.own_loss(loss, call)
            self.time_if_untimed()
            self.exchanged = self.owner._exchange(self, own)

    def own_loss(self, loss, call):
        """This rank's mean loss, as a float, from what the loop passed to `call`; a loss of
        another form stops every rank with one line (each checks its own)."""
        raise NotImplementedError

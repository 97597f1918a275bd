"""The run directory of any DynamicBatch training, kept exactly as `dynalloc train` keeps it.

`dynalloc train`'s built-in loops are users of it (`runtime.mxnet.loop`, `runtime.torch.loop`, the
smallest examples); a user's own script is another (docs/own-training.md;
`examples/own_script/train_resnet.py`): `Recorder.from_environment()` as a context manager,
`start(net, trainer)`, then `epochs()`, `steps(epoch)`, `batch(step)` for the step's samples
(staged arrays or a streamed dataset alike) and `end_epoch(test_loss, accuracy)`. The run
config's `framework` chooses the backend, MXNet's (`runtime.mxnet.backend`: MPI, Gluon) or
PyTorch's (`runtime.torch.backend`: torch.distributed; `start(model, optimizer, scheduler)`);
the rest is the same for both.

Rank 0 gathers every rank's rows and writes config.yaml, iterations.csv, epochs.csv,
metrics.json, train.log and model.params atomically, and checkpoints through the same code, so
`summarize`, `replay`, `compare`, the report and resume work on any such run. Rank 0 holds the
run directory's lock for the whole run (`runtime.common.runlock`). Failures end every rank as in
`dynalloc train` (`runtime.common.faults`, `runtime.common.peerwatch`, `runtime.common.stall`).
"""

import logging
import sys
import time
from pathlib import Path

import numpy as np

from dynalloc.errors import DynallocError, SharedError
from dynalloc.runtime.common import checkpoint, resume
from dynalloc.runtime.common.backends import backend_of
from dynalloc.runtime.common.books import Books
from dynalloc.runtime.common.contention import burners_for
from dynalloc.runtime.common.faults import (
    Stopped,
    agree,
    fail,
    identity,
)
from dynalloc.runtime.common.feed import make_feed
from dynalloc.runtime.common.guard import RunGuard
from dynalloc.runtime.common.placement import pin_rank
from dynalloc.runtime.common.prepare import prepare
from dynalloc.runtime.common.runlock import RunLock
from dynalloc.runtime.common.script_run import script_run

log = logging.getLogger(__name__)


class Recorder:
    """One rank's side of a recorded run: the set-up every rank agrees on, the DynamicBatch,
    and on rank 0 the books. Use it as a context manager around the training."""

    def __init__(self, config_path, out):
        self.backend = backend_of(config_path)
        self.comm = self.backend.comm
        self.rank, self.ranks = self.comm.Get_rank(), self.comm.Get_size()
        self.setup = agree(self.comm, lambda: prepare(config_path, self.rank, self.ranks))
        self.config, self.data = self.setup.config, self.setup.data
        self.out = Path(out)
        self.core = pin_rank(self.config, self.rank)
        # After pinning: the feed's threads share the core.
        self.feed = make_feed(self.setup, self.rank, self.backend.tensors)
        self.dyn = self.net = self.trainer = self.scheduler = self.scaler = None
        self.books = self.burners = None
        self.trained = None  # (epoch, losses, sizes, seconds) of the epoch last trained
        self.unbooked_s = 0.0  # seconds spent before the first epoch (a probe), not yet booked
        self.guard = self.stop = self.stall = None
        self.lock = RunLock(self.out)

    @classmethod
    def from_environment(cls):
        """The run `dynalloc train` (or the pipeline) started this script for. Bad input ends
        the script as it ends `dynalloc train`: one line from rank 0, exit code 2."""
        try:
            return cls(*script_run())
        except DynallocError as error:
            fail(error)

    def __enter__(self):
        try:
            opened = agree(self.comm, lambda: self._open() if not self.rank else None)
        except DynallocError as error:
            fail(error)
        self.resume, self.notes = self.comm.bcast(opened, root=0) or (None, [])
        self.identities = self.comm.allgather(identity())
        self.guard = RunGuard(self.comm, self.rank, self.identities, self.config["stall_timeout"])
        self.stop, self.stall = self.guard.stop, self.guard.stall
        return self

    def _open(self):
        """Rank 0: the run directory, locked for the whole run before anything in it changes,
        and the checkpoint to resume from."""
        note = self.lock.acquire()
        found, notes = resume.open_run_dir(self.out, self.config)
        return found, [note, *notes] if note else notes

    def __exit__(self, kind, error, trace):
        try:
            return self._end(kind, error, trace)
        finally:
            self.lock.release()

    def _end(self, kind, error, trace):
        self.feed.close()
        if self.burners:
            self.burners.stop()
        if self.guard.end(kind, error, trace, log if self.books else None) and self.books:
            self.books.finish(lambda path: self.backend.save(self.net, path),
                              self.dyn.policy.name)  # fmt: skip
        return False

    def start(self, net, trainer, scheduler=None, loss_fn=None, scaler=None):
        """The run's DynamicBatch over `net` and `trainer` (built alike on every rank; under
        PyTorch the optimizer, its learning-rate scheduler if any, and its `GradScaler` for
        mixed precision, whose state the checkpoints keep), from the checkpoint's state when
        the run resumes. Returns it. `loss_fn`, the loss the loop trains with, is what
        `policy.warm_start: probe` times a forward and backward pass of."""
        config, setup = self.config, self.setup
        self.net, self.trainer, self.scheduler, self.scaler = net, trainer, scheduler, scaler
        if self.resume:
            resume.restore_model(self.backend, net, trainer, scheduler, self.resume, scaler)
        self.dyn = self.backend.dynamic_batch(
            net,
            trainer,
            scheduler,
            self.data.train_size,
            config["global_batch"],
            policy=config["policy"],
            min_share=config["min_share"],
            max_share=config["max_share"],
            slowdown=lambda it: setup.scenario.factor(self.rank, it),
            sampler=setup.sampler,
            pin_cores=config["pin_cores"],
            threads_per_rank=config["threads_per_rank"],
            scaler=scaler,
        )
        if self.dyn.policy.min_share != config["min_share"]:
            self.notes.append(
                f"the network has BatchNorm: min_share {self.dyn.policy.min_share} instead of "
                f"{config['min_share']}, so that no rank normalises a share of a sample or two"
            )
        if self.resume:
            self.notes += resume.restore_progress(self.backend, self.dyn, self.resume, config)
            self.dyn.probing = False  # the policy's own state goes on
        elif self.dyn.probing:
            self._probe(net, loss_fn)
        resume.reseed(self.backend, config, self.dyn.iteration)  # after the probe's draws
        self.burners = burners_for(setup.scenario, self.core)
        if self.rank == 0:
            self.books = Books(self.out, setup, self.resume["books"] if self.resume else None)
            if self.dyn.probe_s:
                self.books.probed(self.dyn.probe_s, self.dyn.shares)
            hosts = ", ".join(f"{r}={p}@{h}" for r, (h, p) in enumerate(self.identities))
            log.info("rank pids: %s", hosts)  # to match a launcher's "PID ... killed" to a rank
            for note in self.notes:
                log.warning("%s", note)
                sys.stderr.write(f"dynalloc train: {note}\n")
        return self.dyn

    def _probe(self, net, loss_fn):
        """`policy.warm_start: probe`: a forward and backward pass of the loop's loss, timed on
        made-up samples of the run's input shape (the costs do not depend on the values)."""
        if loss_fn is None:
            raise SharedError(
                "policy.warm_start: probe times the loop's forward and backward pass: give "
                "start() the loss, run.start(net, trainer, loss_fn=loss_fn)"
            )
        shape, classes = self.setup.input_shape, self.data.classes
        with self.stall.watching():
            self.dyn.probe(self.backend.probe_pass(net, loss_fn, shape, classes))
        self.unbooked_s = self.dyn.probe_s  # part of the first epoch's time

    def epochs(self):
        """The epochs still to train, from the resumed one on."""
        first = self.resume["epoch"] if self.resume else 0
        return range(first, self.setup.epochs)

    def steps(self, epoch):
        """The steps of `epoch` still to train; each must be finished before the next. Writes a
        checkpoint every `checkpoint.every` iterations, and raises Stopped after one when a
        signal asked any rank to stop. Averages the non-trainable state at the epoch's end, so
        that the evaluation sees one model. The stall watch watches it all."""
        with self.stall.watching():
            yield from self._steps(epoch)

    def _steps(self, epoch):
        start, progress = 0, ([], [], 0.0)
        if self.resume and self.resume["epoch"] == epoch:
            start, progress = self.resume["batch"], self.resume["epoch_progress"]
        losses, sizes, elapsed = list(progress[0]), list(progress[1]), progress[2]
        elapsed, self.unbooked_s = elapsed + self.unbooked_s, 0.0
        every, total = self.config["checkpoint"]["every"], self.setup.total
        last_batch = self.setup.sampler.batches_per_epoch - 1
        began = time.perf_counter()
        for step in self.dyn.epoch(epoch, start):
            if step.iteration >= total:
                break
            self.dyn.stop_requested = self.stop.requested
            if self.burners:
                self.burners.set(self.setup.scenario.burners(self.rank, step.iteration))
            yield step
            if step.loss is None:
                raise DynallocError(f"step {step.iteration} was not finished: call step.finish")
            losses.append(step.loss)
            sizes.append(step.size)
            done = self.dyn.iteration
            self.stall.beat(done)
            if self.books:
                self.books.progress.update(
                    step.iteration, epoch, step.size, self.dyn.shares, step.loss
                )
            last = step.batch == last_batch or done >= total
            if self.dyn.stopping or (every and done % every == 0 and not last):
                spent = elapsed + time.perf_counter() - began
                path = self.checkpoint(epoch, step.batch + 1, (losses, sizes, spent))
                if self.dyn.stopping:
                    raise Stopped(self.stop.signal_name or "another rank's signal", done, path)
                began, elapsed = time.perf_counter(), spent
        self.resume = None  # past the resumed epoch
        self.trained = (epoch, losses, sizes, elapsed + time.perf_counter() - began)
        self.dyn.average_state()

    def batch(self, step):
        """(x, y) of the step's samples as the framework's tensors; the time it took is the
        step's data_s, which the policy balances with the compute, and the reading behind it,
        hidden by a read-ahead or not, its read_s."""
        began = time.perf_counter()
        x, y = self.feed.batch(step.epoch, step.batch, step.iteration, step.shares, step.indices)
        step.data_s = time.perf_counter() - began
        step.read_s = self.feed.read_s
        return x, y

    def evaluate(self, net, loss_fn):
        """(test loss, test accuracy) of `net` on the staged test set, split over the ranks."""
        with self.stall.watching():
            sums = self.backend.evaluate(
                net, loss_fn, self.feed, self.rank, self.ranks, self.stall.beat
            )
            loss_sum, correct = np.sum(self.comm.allgather(sums), axis=0)
        n = self.data.test_size
        return float(loss_sum / n), float(correct / n)

    def end_epoch(self, test_loss=None, test_accuracy=None):
        """Record the epoch just trained (its train loss comes from the steps) and checkpoint;
        the test figures must be the same on every rank, either may be None (a script that
        measures no test loss); epochs.csv leaves them empty."""
        epoch, losses, sizes, elapsed = self.trained
        with self.stall.watching():
            self.collect_rows()
            if self.books:
                train_loss = float(np.dot(losses, sizes) / sum(sizes))
                self.books.epoch_done(epoch, elapsed, train_loss, test_loss, test_accuracy)
            self.checkpoint(epoch + 1, 0, ([], [], 0.0))

    def collect_rows(self):
        rows = self.comm.gather(self.dyn.rows, root=0)
        skipped = self.comm.gather(self.feed.replaced, root=0)
        self.dyn.rows, self.feed.replaced = [], []
        if self.books:
            self.books.add_rows(rows)
            self.books.records_skipped([name for names in skipped for name in names])

    def checkpoint(self, epoch, batch, progress):
        """Every rank hands rank 0 its share of the state; rank 0 writes the file. Returns its
        path on every rank, or raises there if rank 0 could not write it."""
        began = time.perf_counter()
        self.collect_rows()
        self.backend.wait()
        fixed = self.comm.gather(self.backend.fixed_state(self.dyn), root=0)
        path = error = None
        if self.rank == 0:
            try:
                payload = resume.payload(self, epoch, batch, progress, fixed)
                keep = self.config["checkpoint"]["keep"]
                path = checkpoint.write(self.out, self.dyn.iteration, payload, keep)
                self.books.checkpoint_written(path, time.perf_counter() - began)
            except DynallocError as failure:
                error = failure
        path = self.comm.bcast(str(path) if path else None, root=0)
        if error is not None:
            raise error
        if path is None:  # rank 0 failed and is aborting the job; wait for it
            self.comm.Barrier()
        resume.reseed(self.backend, self.config, self.dyn.iteration)
        self.stall.beat()
        return path

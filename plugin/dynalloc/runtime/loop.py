"""The training loop of one rank of `dynalloc train`: DynamicBatch over the staged data, the
evaluation at each epoch's end, and checkpoints saved and restored so that a resumed run draws
what the uninterrupted one drew. MXNet is imported here, after `dynalloc train` has set the
compute threads it reads at import."""

import logging
import random
import sys
import tempfile
import time
from pathlib import Path

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from dynalloc.errors import DynallocError
from dynalloc.runtime import checkpoint
from dynalloc.runtime.books import Books
from dynalloc.runtime.contention import burners_for
from dynalloc.runtime.faults import Stopped
from dynalloc.runtime.gluon import DynamicBatch
from dynalloc.runtime.prepare import eval_sums, train_batch

log = logging.getLogger(__name__)


class TrainingLoop:
    """The training loop of one rank, with rank 0 keeping the books and the checkpoints."""

    def __init__(self, comm, setup, parts, out, core, resume, notes):
        self.comm, self.setup, self.out = comm, setup, out
        self.config, self.data, self.scenario = setup.config, setup.data, setup.scenario
        self.rank, self.ranks = comm.Get_rank(), comm.Get_size()
        self.net, self.trainer = parts
        self.total, self.batches = setup.total, setup.sampler.batches_per_epoch
        self.resume, self.notes = resume, list(notes)
        if resume:
            self.restore_model(resume)
        config = self.config
        self.dyn = DynamicBatch(
            self.net.collect_params(),
            self.trainer,
            len(self.data.train_y),
            config["global_batch"],
            policy=config["policy"],
            min_share=config["min_share"],
            max_share=config["max_share"],
            slowdown=lambda it: self.scenario.factor(self.rank, it),
            sampler=setup.sampler,
        )
        if resume:
            self.restore_progress(resume)
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.books = None
        self.burners = burners_for(self.scenario, core)

    def open_books(self, identities):
        if self.rank == 0:
            saved = self.resume["books"] if self.resume else None
            self.books = Books(self.out, self.setup, saved)
            hosts = ", ".join(f"{r}={pid}@{host}" for r, (host, pid) in enumerate(identities))
            log.info("rank pids: %s", hosts)  # to match a launcher's "PID ... killed" to a rank
            for note in self.notes:
                log.warning("%s", note)
                sys.stderr.write(f"dynalloc train: {note}\n")

    def train(self, stop):
        """Train from the cursor to the end; raises Stopped after a checkpoint when a signal
        asked every rank to stop."""
        first, batch, progress = 0, 0, ([], [], 0.0)
        if self.resume:
            first, batch = self.resume["epoch"], self.resume["batch"]
            progress = self.resume["epoch_progress"]
        every = self.config["checkpoint"]["every"]
        try:
            for epoch in range(first, self.setup.epochs):
                losses, sizes, elapsed = progress
                losses, sizes = list(losses), list(sizes)
                began = time.perf_counter()
                for step in self.dyn.epoch(epoch, batch):
                    if step.iteration >= self.total:
                        break
                    self.dyn.stop_requested = stop.requested
                    losses.append(self.iterate(step))
                    sizes.append(int(np.sum(step.shares)))
                    done = self.dyn.iteration
                    last = step.batch == self.batches - 1 or done >= self.total
                    if self.dyn.stopping or (every and done % every == 0 and not last):
                        spent = elapsed + time.perf_counter() - began
                        path = self.checkpoint(epoch, step.batch + 1, (losses, sizes, spent))
                        if self.dyn.stopping:
                            raise Stopped(stop.signal_name or "another rank's signal", done, path)
                        began, elapsed = time.perf_counter(), spent
                batch, progress = 0, ([], [], 0.0)
                self.end_epoch(epoch, losses, sizes, elapsed + time.perf_counter() - began)
        finally:
            if self.burners:
                self.burners.stop()

    def iterate(self, step):
        if self.burners:
            self.burners.set(self.scenario.burners(self.rank, step.iteration))
        x, y = train_batch(self.data, step.indices)
        with step.compute():
            with autograd.record():
                loss = self.loss_fn(self.net(x), y)
            loss.backward()
        loss = step.finish(loss)
        if self.books:
            self.books.progress.update(
                step.iteration, step.epoch, int(np.sum(step.shares)), self.dyn.shares, loss
            )
        return loss

    def end_epoch(self, epoch, losses, sizes, elapsed):
        self.dyn.average_state()
        test_loss, test_accuracy = self.evaluate()
        self.collect_rows()
        if self.books:
            train_loss = float(np.dot(losses, sizes) / sum(sizes))
            self.books.epoch_done(epoch, elapsed, train_loss, test_loss, test_accuracy)
        self.checkpoint(epoch + 1, 0, ([], [], 0.0))

    def collect_rows(self):
        rows = self.dyn.exchange.gather_objects(self.dyn.rows)
        self.dyn.rows = []
        if self.books:
            self.books.add_rows(rows)

    def checkpoint(self, epoch, batch, progress):
        """Every rank hands rank 0 its share of the state; rank 0 writes the file. Returns its
        path on every rank, or raises there if rank 0 could not write it."""
        began = time.perf_counter()
        self.collect_rows()
        mx.nd.waitall()
        fixed = self.comm.gather([t.copy() for t in self.dyn.state.tensors], root=0)
        path = error = None
        if self.rank == 0:
            try:
                path = checkpoint.write(
                    self.out,
                    self.dyn.iteration,
                    self.payload(epoch, batch, progress, fixed),
                    self.config["checkpoint"]["keep"],
                )
                self.books.checkpoint_written(path, time.perf_counter() - began)
            except DynallocError as failure:
                error = failure
        path = self.comm.bcast(str(path) if path else None, root=0)
        if error is not None:
            raise error
        if path is None:  # rank 0 failed and is aborting the job; wait for it
            self.comm.Barrier()
        self.reseed()
        return path

    def payload(self, epoch, batch, progress, fixed):
        with tempfile.TemporaryDirectory() as folder:
            states = Path(folder) / "trainer.states"
            self.trainer.save_states(str(states))
            trainer_states = states.read_bytes()
        losses, sizes, elapsed = progress
        return {
            "config": self.config,
            "iteration": self.dyn.iteration,
            "epoch": epoch,
            "batch": batch,
            "complete": self.dyn.iteration >= self.total and batch == 0,
            "epoch_progress": (list(map(float, losses)), list(sizes), float(elapsed)),
            "params": {name: p.data().asnumpy() for name, p in self.net.collect_params().items()},
            "fixed_state": fixed,
            "trainer": trainer_states,
            "policy": self.dyn.policy,
            "random": {"numpy": np.random.get_state(), "python": random.getstate()},
            "books": self.books.state(),
        }

    def restore_model(self, saved):
        """Parameters, BatchNorm statistics and optimizer state of the checkpoint; run before
        DynamicBatch broadcasts rank 0's parameters."""
        params = self.net.collect_params()
        if sorted(params.keys()) != sorted(saved["params"]):
            raise DynallocError("the checkpoint's parameters do not match the model's names")
        for name, p in params.items():
            p.set_data(mx.nd.array(saved["params"][name]))
        with tempfile.TemporaryDirectory() as folder:
            states = Path(folder) / "trainer.states"
            states.write_bytes(saved["trainer"])
            self.trainer.load_states(str(states))
        np.random.set_state(saved["random"]["numpy"])
        random.setstate(saved["random"]["python"])

    def restore_progress(self, saved):
        """The data cursor, the policy (when it is the same policy on as many ranks) and each
        rank's non-trainable state (averaged when the number of ranks changed)."""
        self.dyn.iteration = saved["iteration"]
        fixed = saved["fixed_state"]
        mine = fixed[self.rank] if len(fixed) == self.ranks else None
        for i, tensor in enumerate(self.dyn.state.tensors):
            tensor[:] = mine[i] if mine else np.mean([f[i] for f in fixed], axis=0)
        old, new = saved["config"], self.config
        if not all(old[k] == new[k] for k in ("policy", "ranks", "min_share", "max_share")):
            self.notes.append("policy or ranks changed since the checkpoint: shares start afresh")
        elif checkpoint.layout(saved["policy"]) != checkpoint.layout(self.dyn.policy):
            self.notes.append(
                "the checkpoint's policy state is another version's: shares start afresh"
            )
        else:
            self.dyn.policy = saved["policy"]
        self.reseed()

    def reseed(self):
        """MXNet's random state cannot be saved: make it a function of the iteration at every
        checkpoint, so a resumed run draws what the uninterrupted one drew."""
        mx.random.seed(self.config["seed"] * 1_000_003 + self.dyn.iteration)

    def finish(self):
        if self.books:
            self.books.finish(self.net, self.dyn.policy.name)

    def evaluate(self):
        """Test loss and accuracy, the test set split evenly over the ranks."""
        sums = eval_sums(self.net, self.loss_fn, self.data, self.rank, self.ranks)
        loss_sum, correct = self.dyn.exchange.allsum(sums)
        n = len(self.data.test_y)
        return loss_sum / n, correct / n

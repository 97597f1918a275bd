"""`dynalloc train`: one MPI rank of a training run (`mpiexec -n R dynalloc train ...`).

Rank 0 writes the run directory: config.yaml (the resolved config), iterations.csv, epochs.csv,
metrics.json, train.log and model.params. Everything that can be wrong with the input is found
before the directory is touched, and all ranks agree on it, so no rank waits in a collective for
a rank that already gave up.
"""

import logging
import os
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import yaml

from dynalloc import checkpoint
from dynalloc.config import load_config, planned_epochs, resolve, total_iterations
from dynalloc.dataset import load_staged
from dynalloc.errors import DynallocError, SharedError
from dynalloc.faults import EXIT_STOPPED, Stopped, StopRequest, abort, identity
from dynalloc.fsutil import atomic_write
from dynalloc.partition import GlobalBatchSampler
from dynalloc.peerwatch import PeerWatch
from dynalloc.scenario import Scenario
from dynalloc.telemetry import (
    EPOCH_FIELDS,
    ROW_FIELDS,
    GrowingCSV,
    Progress,
    wait_fractions,
    write_json,
)

EVAL_CHUNK = 1024
RUN_FILES = ("metrics.json", "iterations.csv", "epochs.csv", "model.params", "train.log")
log = logging.getLogger("dynalloc.train")


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML)")
    parser.add_argument("--out", required=True, help="run directory to write")


def run(args):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    config, data, sampler = agree(comm, lambda: prepare(args, rank, ranks))
    # Compute threads per rank, set before MXNet loads; from the config, not the environment,
    # since launchers export their own (Snakemake sets OMP_NUM_THREADS to the job's threads,
    # which would make ranks sharing cores thrash).
    for variable in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        os.environ[variable] = str(config["threads_per_rank"])
    core = None
    if config["pin_cores"]:
        from dynalloc.contention import pin_to_core

        core = pin_to_core(rank, config["threads_per_rank"])
    total = total_iterations(config, sampler.batches_per_epoch)
    parts = agree(comm, lambda: build(config, data, total))
    out = Path(args.out)
    opened = agree(comm, lambda: open_run_dir(out, config) if rank == 0 else None)
    resume, notes = comm.bcast(opened, root=0) or (None, [])
    identities = comm.allgather(identity())
    with StopRequest() as stop, PeerWatch(rank, identities) as watch:
        watch.meet(comm.allgather(watch.pid))
        runner = None
        try:
            runner = Run(comm, config, data, sampler, total, parts, out, core, resume, notes)
            runner.open_books(identities)
            runner.train(stop)
        except Stopped as stopped:
            watch.disarm()
            comm.Barrier()
            if rank == 0:
                log.info("%s", stopped)
                sys.stderr.write(f"dynalloc train: {stopped}\n")
            return EXIT_STOPPED
        except SharedError:
            watch.disarm()
            comm.Barrier()
            raise
        except BaseException as error:  # noqa: BLE001 - any failure must end every rank
            watch.disarm_host()
            abort(comm, rank, error, log if runner and runner.books else None)
        watch.disarm()  # peers that exit after the barrier are done, not lost
        comm.Barrier()
        runner.finish()
    return 0


def agree(comm, setup):
    """Run `setup` on every rank; if it fails on any, every rank raises that rank's error."""
    try:
        result, message = setup(), None
    except DynallocError as error:
        result, message = None, str(error)
    messages = [m for m in comm.allgather(message) if m]
    if messages:
        raise DynallocError(messages[0])
    return result


def prepare(args, rank, ranks, policy=None):
    """Config, dataset and sampler; `policy` (a mapping) replaces the config's policy."""
    raw = load_config(args.config)
    config = resolve(raw if policy is None else {**raw, "policy": policy}, ranks)
    # Rank 0 reads every byte (sha256, NaN); the others check the manifest, shapes and counts.
    data = load_staged(config["dataset"], verify=rank == 0)
    try:
        sampler = GlobalBatchSampler(
            len(data.train_y),
            config["global_batch"],
            config["seed"],
            config["drop_last"],
            config["min_share"],
            ranks,
        )
    except ValueError as error:
        raise DynallocError(f"global_batch: {error}") from None
    return config, data, sampler


def build(config, data, total, **trainer_options):
    """Model, optimizer and trainer: validated here, before the run directory exists.
    `trainer_options` go to gluon.Trainer (the baseline's kvstore); by default none."""
    from mxnet import gluon

    from dynalloc.models import build_model
    from dynalloc.optim import build_optimizer

    optimizer = build_optimizer(config["optimizer"], total)
    net = build_model(config["model"], data.classes, tuple(data.input_shape), config["seed"])
    options = {"kvstore": None, **trainer_options}
    trainer = gluon.Trainer(net.collect_params(), optimizer, **options)
    return net, trainer


def open_run_dir(out, config):
    """Create the run directory, or find the checkpoint to resume it from.

    Returns (resume, notes): the newest usable checkpoint's payload (None for a fresh start) and
    what rank 0 should log about the choice. A checkpoint of the same run that already finished
    is resumed too (it only rewrites the final files); one of a finished run with another config
    is set aside (the pipeline reruns a run whose config changed), and an unfinished one of
    another run is refused, naming the key that differs.
    """
    notes = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        found = checkpoint.newest_valid(out, notes.append)
        if found and found[1]["complete"] and found[1]["config"] != config:
            notes.append(f"{out} holds a finished run of another config: starting afresh")
            checkpoint.remove_all(out)
            found = None
        if found:
            checkpoint.check_resumable(found[0], found[1]["config"], config)
            notes.append(f"resuming from {found[0]} (iteration {found[1]['iteration']})")
        if found and (out / "train.log").exists():  # a finished run's log goes on growing
            os.replace(out / "train.log", out / "train.log.partial")
        for stale in RUN_FILES:  # a previous run's results must not pass for this one's
            (out / stale).unlink(missing_ok=True)
        if not found:
            (out / "train.log.partial").unlink(missing_ok=True)
        with atomic_write(out / "config.yaml") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None
    return (found[1] if found else None), notes


class Run:
    """The training loop of one rank, with rank 0 keeping the books and the checkpoints."""

    def __init__(self, comm, config, data, sampler, total, parts, out, core, resume, notes):
        from mxnet import gluon

        from dynalloc.gluon import DynamicBatch

        self.comm, self.config, self.data, self.out = comm, config, data, out
        self.rank, self.ranks = comm.Get_rank(), comm.Get_size()
        self.net, self.trainer = parts
        self.total, self.batches = total, sampler.batches_per_epoch
        self.epochs = planned_epochs(config, sampler.batches_per_epoch)
        self.scenario = Scenario(self.ranks, **config["scenario"])
        self.resume, self.notes = resume, list(notes)
        if resume:
            self.restore_model(resume)
        policy = dict(config["policy"])
        self.dyn = DynamicBatch(
            self.net.collect_params(),
            self.trainer,
            len(data.train_y),
            config["global_batch"],
            policy.pop("name"),
            config["seed"],
            config["min_share"],
            config["max_share"],
            config["drop_last"],
            lambda it: self.scenario.factor(self.rank, it),
            policy,
        )
        if resume:
            self.restore_progress(resume)
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.books = None
        self.burners = None
        if core is not None and any(c.mode == "contention" for c in self.scenario.changes):
            from dynalloc.contention import Burners

            self.burners = Burners(core)

    def open_books(self, identities):
        if self.rank == 0:
            saved = self.resume["books"] if self.resume else None
            self.books = Books(self.out, self.config, self.scenario, self.total, self.epochs, saved)
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
            for epoch in range(first, self.epochs):
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
        import mxnet as mx
        from mxnet import autograd

        if self.burners:
            self.burners.set(self.scenario.burners(self.rank, step.iteration))
        rows = np.sort(step.indices)  # sequential reads of the memory-mapped file
        x = mx.nd.array(self.data.train_x[rows])
        y = mx.nd.array(self.data.train_y[rows])
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
        import mxnet as mx

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
        import mxnet as mx

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
        import mxnet as mx

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


def eval_sums(net, loss_fn, data, rank, ranks):
    """[summed loss, correct predictions] over rank's even slice of the test set; the sums of
    all ranks give the test loss and accuracy."""
    import mxnet as mx

    n = len(data.test_y)
    lo, hi = n * rank // ranks, n * (rank + 1) // ranks
    loss_sum = correct = 0.0
    for start in range(lo, hi, EVAL_CHUNK):
        stop = min(start + EVAL_CHUNK, hi)
        x = mx.nd.array(data.test_x[start:stop])
        y = mx.nd.array(data.test_y[start:stop])
        out = net(x)
        loss_sum += float(loss_fn(out, y).sum().asscalar())
        correct += float((out.argmax(axis=1) == y).sum().asscalar())
    return [loss_sum, correct]


class Books:
    """Rank 0's run directory: logs growing under temporary names, final files renamed in.
    `saved` (a checkpoint's `state()`) continues the books of an interrupted run: its rows are
    rewritten, so every iteration appears exactly once. `stream` takes the progress lines
    (default stderr)."""

    def __init__(self, out, config, scenario, total, epochs, saved=None, stream=None):
        self.out, self.config, self.scenario, self.total = out, config, scenario, total
        saved = saved or {
            "rows": [],
            "epochs": [],
            "samples": 0,
            "wall_s": 0.0,
            "checkpoint_s": 0.0,
            "time_to_target": None,
        }
        self.rows, self.epoch_rows = list(saved["rows"]), list(saved["epochs"])
        self.samples, self.wall_s = saved["samples"], saved["wall_s"]
        self.checkpoint_s, self.time_to_target = saved["checkpoint_s"], saved["time_to_target"]
        self.iterations = GrowingCSV(out / "iterations.csv", ROW_FIELDS)
        self.iterations.write(self.rows)
        self.epochs = GrowingCSV(out / "epochs.csv", EPOCH_FIELDS)
        self.epochs.write(self.epoch_rows)
        self.log_path = out / "train.log"
        self.handler = logging.FileHandler(out / "train.log.partial", mode="a")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger().addHandler(self.handler)
        logging.getLogger().setLevel(logging.INFO)
        logging.captureWarnings(True)  # the policies' warnings reach train.log
        warnings.filterwarnings("ignore", category=DeprecationWarning)  # MXNet's, not ours
        log.info(
            "run %s: %d ranks, model %s, policy %s, global batch %d, %d iterations",
            out,
            config["ranks"],
            config["model"],
            config["policy"]["name"],
            config["global_batch"],
            total,
        )
        self.progress = Progress(total, epochs, stream)

    def state(self):
        return {
            "rows": self.rows,
            "epochs": self.epoch_rows,
            "samples": self.samples,
            "wall_s": self.wall_s,
            "checkpoint_s": self.checkpoint_s,
            "time_to_target": self.time_to_target,
        }

    def add_rows(self, rank_rows):
        rows = sorted((row for rows in rank_rows for row in rows), key=lambda r: (r[0], r[2]))
        # DynamicBatch logs the sleep it applied; the file records the whole emulated slowdown,
        # CPU contention included.
        rows = [(*r[:9], self.scenario.nominal_slowdown(r[2], r[0]), *r[10:]) for r in rows]
        self.rows.extend(rows)
        self.samples += sum(row[3] for row in rows)
        self.iterations.write(rows)

    def epoch_done(self, epoch, elapsed, train_loss, test_loss, test_accuracy):
        self.wall_s += elapsed
        row = (epoch, self.wall_s, train_loss, test_loss, test_accuracy)
        self.epoch_rows.append(row)
        self.epochs.write([row])
        target = self.config["target_accuracy"]
        if target is not None and self.time_to_target is None and test_accuracy >= target:
            self.time_to_target = self.wall_s
        log.info(
            "epoch %d: %.1f s, train loss %.4f, test loss %.4f, test accuracy %.4f",
            epoch,
            elapsed,
            train_loss,
            test_loss,
            test_accuracy,
        )

    def checkpoint_written(self, path, seconds):
        self.checkpoint_s += seconds
        log.info("checkpoint %s written in %.3f s", path.name, seconds)

    def finish(self, net, policy):
        self.progress.close()
        tmp = self.out / ".model.params.tmp"
        try:
            net.save_parameters(str(tmp))
            os.replace(tmp, self.out / "model.params")
        except OSError as error:
            raise DynallocError(f"cannot write {self.out / 'model.params'}: {error}") from None
        fractions = wait_fractions(self.rows, self.config["ranks"])
        final = self.epoch_rows[-1] if self.epoch_rows else (None, 0.0, *[float("nan")] * 3)
        metrics = {
            "policy": policy,
            "ranks": self.config["ranks"],
            "model": self.config["model"],
            "global_batch": self.config["global_batch"],
            "iterations": self.total,
            "samples": self.samples,
            "wall_s": self.wall_s,
            "samples_per_s": self.samples / self.wall_s if self.wall_s > 0 else 0.0,
            "mean_wait_fraction": float(np.mean(fractions)),
            "wait_fraction_per_rank": fractions,
            "final_test_loss": final[3],
            "final_test_accuracy": final[4],
            "target_accuracy": self.config["target_accuracy"],
            "time_to_target_s": self.time_to_target,
            "checkpoint_s": self.checkpoint_s,
        }
        write_json(self.out / "metrics.json", metrics)
        log.info(
            "done: %.1f samples/s, mean wait fraction %.3f, test accuracy %.4f",
            metrics["samples_per_s"],
            metrics["mean_wait_fraction"],
            final[4],
        )
        self.iterations.close()
        self.epochs.close()
        logging.getLogger().removeHandler(self.handler)
        self.handler.close()
        os.replace(self.out / "train.log.partial", self.log_path)

"""`dynalloc train`: one MPI rank of a training run (`mpiexec -n R dynalloc train ...`).

Rank 0 writes the run directory: config.yaml (the resolved config), iterations.csv, epochs.csv,
metrics.json, train.log and model.params. Everything that can be wrong with the input is found
before the directory is touched, and all ranks agree on it, so no rank waits in a collective for
a rank that already gave up.
"""

import logging
import os
import time
import warnings
from pathlib import Path

import numpy as np
import yaml

from dynalloc.config import load_config, planned_epochs, resolve, total_iterations
from dynalloc.dataset import load_staged
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write
from dynalloc.partition import GlobalBatchSampler
from dynalloc.scenario import Scenario
from dynalloc.telemetry import EPOCH_FIELDS, GrowingCSV, Progress, wait_fractions, write_json

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
    agree(comm, lambda: make_run_dir(out, config) if rank == 0 else None)
    return Run(comm, config, data, sampler, total, parts, out, core).train()


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


def prepare(args, rank, ranks):
    config = resolve(load_config(args.config), ranks)
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


def build(config, data, total):
    """Model, optimizer and trainer: validated here, before the run directory exists."""
    from mxnet import gluon

    from dynalloc.models import build_model
    from dynalloc.optim import build_optimizer

    optimizer = build_optimizer(config["optimizer"], total)
    net = build_model(config["model"], data.classes, tuple(data.input_shape), config["seed"])
    trainer = gluon.Trainer(net.collect_params(), optimizer, kvstore=None)
    return net, trainer


def make_run_dir(out, config):
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in RUN_FILES:  # a previous run's results must not pass for this one's
            (out / stale).unlink(missing_ok=True)
        with atomic_write(out / "config.yaml") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None


class Run:
    """The training loop of one rank, with rank 0 keeping the books."""

    def __init__(self, comm, config, data, sampler, total, parts, out, core):
        from mxnet import gluon

        from dynalloc.gluon import DynamicBatch

        self.comm, self.config, self.data, self.out = comm, config, data, out
        self.rank, self.ranks = comm.Get_rank(), comm.Get_size()
        self.net, trainer = parts
        self.total = total
        self.epochs = planned_epochs(config, sampler.batches_per_epoch)
        self.scenario = Scenario(
            self.ranks, config["scenario"].get("slowdown"), config["scenario"].get("changes") or ()
        )
        policy = dict(config["policy"])
        self.dyn = DynamicBatch(
            self.net.collect_params(),
            trainer,
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
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.burners = None
        if core is not None and any(c.mode == "contention" for c in self.scenario.changes):
            from dynalloc.contention import Burners

            self.burners = Burners(core)

    def train(self):
        books = None
        if self.rank == 0:
            books = Books(self.out, self.config, self.scenario, self.total, self.epochs)
        try:
            for epoch in range(self.epochs):
                began = time.perf_counter()
                losses, sizes = self.train_epoch(epoch, books)
                elapsed = time.perf_counter() - began
                self.dyn.average_state()
                test_loss, test_accuracy = self.evaluate()
                rows = self.dyn.exchange.gather_objects(self.dyn.rows)
                self.dyn.rows = []
                if books:
                    books.epoch_done(
                        epoch,
                        elapsed,
                        float(np.dot(losses, sizes) / sum(sizes)),
                        test_loss,
                        test_accuracy,
                        rows,
                    )
        finally:
            if self.burners:
                self.burners.stop()
        if books:
            books.finish(self.net, self.dyn.policy.name)
        return 0

    def train_epoch(self, epoch, books):
        import mxnet as mx
        from mxnet import autograd

        losses, sizes = [], []
        for step in self.dyn.epoch(epoch):
            if step.iteration >= self.total:
                break
            if self.burners:
                self.burners.set(self.scenario.burners(self.rank, step.iteration))
            rows = np.sort(step.indices)  # sequential reads of the memory-mapped file
            x = mx.nd.array(self.data.train_x[rows])
            y = mx.nd.array(self.data.train_y[rows])
            with step.compute():
                with autograd.record():
                    loss = self.loss_fn(self.net(x), y)
                loss.backward()
            losses.append(step.finish(loss))
            sizes.append(int(np.sum(step.shares)))
            if books:
                books.progress.update(step.iteration, epoch, sizes[-1], self.dyn.shares, losses[-1])
        return np.array(losses), sizes

    def evaluate(self):
        """Test loss and accuracy, the test set split evenly over the ranks."""
        import mxnet as mx

        n = len(self.data.test_y)
        lo, hi = n * self.rank // self.ranks, n * (self.rank + 1) // self.ranks
        loss_sum = correct = 0.0
        for start in range(lo, hi, EVAL_CHUNK):
            stop = min(start + EVAL_CHUNK, hi)
            x = mx.nd.array(self.data.test_x[start:stop])
            y = mx.nd.array(self.data.test_y[start:stop])
            out = self.net(x)
            loss_sum += float(self.loss_fn(out, y).sum().asscalar())
            correct += float((out.argmax(axis=1) == y).sum().asscalar())
        loss_sum, correct = self.dyn.exchange.allsum([loss_sum, correct])
        return loss_sum / n, correct / n


class Books:
    """Rank 0's run directory: logs growing under temporary names, final files renamed in."""

    def __init__(self, out, config, scenario, total, epochs):
        from dynalloc.gluon import ROW_FIELDS

        self.out, self.config, self.scenario, self.total = out, config, scenario, total
        self.iterations = GrowingCSV(out / "iterations.csv", ROW_FIELDS)
        self.epochs = GrowingCSV(out / "epochs.csv", EPOCH_FIELDS)
        self.log_path = out / "train.log"
        self.handler = logging.FileHandler(out / "train.log.partial", mode="w")
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
        self.progress = Progress(total, epochs)
        self.wall_s = 0.0
        self.samples = 0
        self.rows = []
        self.time_to_target = None
        self.final = (float("nan"), float("nan"))

    def epoch_done(self, epoch, elapsed, train_loss, test_loss, test_accuracy, rank_rows):
        self.wall_s += elapsed
        rows = sorted((row for rows in rank_rows for row in rows), key=lambda r: (r[0], r[2]))
        # DynamicBatch logs the sleep it applied; the file records the whole emulated slowdown,
        # CPU contention included.
        rows = [(*r[:9], self.scenario.nominal_slowdown(r[2], r[0]), *r[10:]) for r in rows]
        self.rows.extend(rows)
        self.samples += sum(row[3] for row in rows)
        self.iterations.write(rows)
        self.epochs.write([(epoch, self.wall_s, train_loss, test_loss, test_accuracy)])
        self.final = (test_loss, test_accuracy)
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

    def finish(self, net, policy):
        self.progress.close()
        tmp = self.out / ".model.params.tmp"
        net.save_parameters(str(tmp))
        os.replace(tmp, self.out / "model.params")
        fractions = wait_fractions(self.rows, self.config["ranks"])
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
            "final_test_loss": self.final[0],
            "final_test_accuracy": self.final[1],
            "target_accuracy": self.config["target_accuracy"],
            "time_to_target_s": self.time_to_target,
        }
        write_json(self.out / "metrics.json", metrics)
        log.info(
            "done: %.1f samples/s, mean wait fraction %.3f, test accuracy %.4f",
            metrics["samples_per_s"],
            metrics["mean_wait_fraction"],
            self.final[1],
        )
        self.iterations.close()
        self.epochs.close()
        logging.getLogger().removeHandler(self.handler)
        self.handler.close()
        os.replace(self.out / "train.log.partial", self.log_path)

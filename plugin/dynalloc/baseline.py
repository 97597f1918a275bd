"""`dynalloc baseline`: the same run trained with MXNet's own parameter server, `dist_sync`.

This is what users would run instead of dynalloc: the same config, model, global batch and the
same samples in every iteration as `dynalloc train` with policy `static`, but the gradients go
through MXNet's distributed kvstore instead of one MPI Allreduce. The command starts a scheduler,
one server and R workers on localhost by hand, through MXNet's `DMLC_*` variables (the pip wheel
lacks the dmlc tracker that `tools/launch.py` imports), watches them and, when one fails, ends
them all with one line naming it. Worker 0 writes the run directory with `dynalloc train`'s
books, so files, columns and timings mean the same:

- `compute_s`: forward and backward of the worker's share after the engine finished (plus the
  emulated slowdown), as in train;
- `sync_s`: `trainer.step` until the engine finished: push of the gradients, the server's sum and
  optimizer update, pull of the new weights (it holds the wait for stragglers, as train's does);
- `wait_s`: the iteration's slowest `compute_s` minus the worker's own, from all workers' rows;
- `wall_s`: training time without evaluation and bookkeeping.

The policy of the config is replaced by `static` (dist_sync splits every batch equally); the
scenario applies as in train. No checkpoints are written. BatchNorm running statistics stay each
worker's own, as with dist_sync: each evaluates its slice of the test set with them and worker
0's are saved.
"""

import argparse
import contextlib
import ctypes
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

from dynalloc import checkpoint
from dynalloc.config import load_config, planned_epochs, total_iterations
from dynalloc.errors import DynallocError
from dynalloc.faults import EXIT_FAILED, describe
from dynalloc.fsutil import atomic_write
from dynalloc.policies import make_policy
from dynalloc.scenario import Scenario
from dynalloc.telemetry import write_json
from dynalloc.train import RUN_FILES, Books, build, eval_sums, prepare

POLICY = "dist_sync"  # the policy column of iterations.csv and metrics.json
STATIC = {"name": "static"}
WORK = ".baseline"  # in the run directory: the processes' logs, markers and per-epoch rows
HOST = "127.0.0.1"
PARENT = "DYNALLOC_BASELINE_PARENT"  # the launcher's pid, for the children's death signal
START_TIMEOUT_S = 180  # every worker joined the kvstore (four MXNet imports on a busy machine)
EXIT_TIMEOUT_S = 60  # the processes still running once every worker finished its work
POLL_S = 0.1
PR_SET_PDEATHSIG = 1


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML), as for dynalloc train")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--workers", type=int, required=True, help="worker processes (R)")


def run(args):
    if args.workers < 1:
        raise DynallocError(f"--workers must be at least 1, got {args.workers}")
    policy = load_config(args.config).get("policy")
    name = policy.get("name") if isinstance(policy, dict) else policy
    config, data, sampler = prepare(args, 0, args.workers, policy=STATIC)
    build(config, data, total_iterations(config, sampler.batches_per_epoch))  # fails here, not in R
    out = Path(args.out)
    open_run_dir(out, config)
    if name not in (None, "static"):
        sys.stderr.write(f"dynalloc baseline: policy {name!r} ignored: dist_sync splits equally\n")
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        with Launch(out, args.workers, config["threads_per_rank"]) as launch:
            launch.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    shutil.rmtree(out / WORK, ignore_errors=True)
    return 0


def _stop(number, frame):
    raise DynallocError(f"stopped by {signal.Signals(number).name}")


def open_run_dir(out, config):
    """The run directory with this run's config.yaml and no file of an earlier run (nor its
    checkpoints: a baseline run writes none, and a stale one would pass for this run's)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        checkpoint.remove_all(out)
        for stale in (*RUN_FILES, "train.log.partial"):
            (out / stale).unlink(missing_ok=True)
        shutil.rmtree(out / WORK, ignore_errors=True)
        (out / WORK).mkdir()
        with atomic_write(out / "config.yaml") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None


def free_port():
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class Launch:
    """The scheduler, the server and the workers, each a child process in its own process
    group; leaving the `with` block kills every group still alive, so nothing they started
    (contention burners included) outlives the command. Children also die with this process
    (PR_SET_PDEATHSIG), should it be killed outright."""

    def __init__(self, out, workers, threads):
        self.out, self.work, self.workers = out, out / WORK, workers
        threads = str(threads)
        self.env = {
            **os.environ,
            "DMLC_PS_ROOT_URI": HOST,
            "DMLC_PS_ROOT_PORT": str(free_port()),
            "DMLC_NODE_HOST": HOST,
            "DMLC_NUM_SERVER": "1",
            "DMLC_NUM_WORKER": str(workers),
            "OMP_NUM_THREADS": threads,
            "MXNET_CPU_WORKER_NTHREADS": threads,
            PARENT: str(os.getpid()),
        }
        self.children = {}  # name -> Popen, in start order

    def __enter__(self):
        progress = os.dup(2)  # worker 0's progress lines reach this command's stderr
        try:
            self.start("scheduler", "scheduler")
            self.start("server", "server")
            for index in range(self.workers):
                arguments = ["--out", str(self.out), "--workers", str(self.workers)]
                arguments += ["--index", str(index)]
                if index == 0:
                    arguments += ["--progress-fd", str(progress)]
                self.start(f"worker {index}", "worker", *arguments)
        except BaseException:
            self.end()
            raise
        finally:
            os.close(progress)
        return self

    def __exit__(self, *exc):
        self.end()

    def start(self, name, role, *arguments):
        command = [sys.executable, "-m", "dynalloc.baseline", role, *arguments]
        fds = (int(arguments[-1]),) if "--progress-fd" in arguments else ()
        with open(self.log(name), "wb") as log:
            self.children[name] = subprocess.Popen(
                command,
                env={**self.env, "DMLC_ROLE": role},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=fds,
            )

    def log(self, name):
        return self.work / f"{name.replace(' ', '-')}.log"

    def marker(self, kind, index):
        return (self.work / f"{kind}-{index}").exists()

    def wait(self):
        """Return once every worker finished; raise DynallocError naming the first process
        that failed, exited too early, or a start that did not complete in time."""
        began, finished = time.monotonic(), None
        while True:
            codes = {name: child.poll() for name, child in self.children.items()}
            done = all(self.marker("done", i) for i in range(self.workers))  # after the polls
            for name, code in codes.items():
                if code is not None and code != 0:
                    self.fail(name, _exit_status(code))
                mine = name.startswith("worker ") and self.marker("done", name.split()[1])
                if code == 0 and not (done or mine):
                    self.fail(name, "exited before the training finished")
            if None not in codes.values():
                return
            now = time.monotonic()
            if finished is None and done:
                finished = now
            if finished is not None and now - finished > EXIT_TIMEOUT_S:
                return  # the run directory is complete; what lingers is killed on exit
            waiting = [i for i in range(self.workers) if not self.marker("ready", i)]
            if waiting and now - began > START_TIMEOUT_S:
                self.fail(
                    f"worker {waiting[0]}",
                    f"had not joined the kvstore after {START_TIMEOUT_S} s",
                )
            time.sleep(POLL_S)

    def fail(self, name, what):
        """Raise the one-line error about `name`: its own message when it left one, else the
        last line of its log."""
        error = self.work / f"{name.replace(' ', '-')}.error"
        detail = error.read_text() if error.exists() else _last_line(self.log(name))
        detail = " ".join(detail.split())[:400]
        raise DynallocError(
            f"{name} (pid {self.children[name].pid}) {what}"
            f"{': ' + detail if detail else ''}; the others were stopped (log {self.log(name)})"
        )

    def end(self):
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        for child in self.children.values():
            child.wait()


def _exit_status(code):
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def _last_line(path):
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def with_waits(rows):
    """Rows (ROW_FIELDS) of all workers with wait_s = the iteration's slowest compute_s minus
    the row's own: train's definition, computed afterwards since workers exchange no times."""
    slowest = {}
    for row in rows:
        slowest[row[0]] = max(slowest.get(row[0], -math.inf), row[4])
    return [(*row[:6], slowest[row[0]] - row[4], *row[7:]) for row in rows]


class Worker:
    """One worker: backward on its equal share, MXNet's dist_sync kvstore sums the gradients and
    its server applies the optimizer; worker 0 keeps the books."""

    def __init__(self, out, index, workers, progress_fd=None):
        self.out, self.work, self.index, self.workers = out, out / WORK, index, workers
        namespace = SimpleNamespace(config=str(out / "config.yaml"))
        config, self.data, self.sampler = prepare(namespace, index, workers, policy=STATIC)
        self.config, self.global_batch = config, config["global_batch"]
        core = None
        if config["pin_cores"]:  # before MXNet starts its threads, which inherit the mask
            from dynalloc.contention import pin_to_core

            core = pin_to_core(index, config["threads_per_rank"])
        import mxnet as mx
        from mxnet import gluon

        self.total = total_iterations(config, self.sampler.batches_per_epoch)
        self.epochs = planned_epochs(config, self.sampler.batches_per_epoch)
        self.scenario = Scenario(workers, **config["scenario"])
        self.kv = mx.kv.create("dist_sync")  # returns once every process has joined
        (self.work / f"ready-{index}").touch()
        # update_on_kvstore: the server runs the optimizer (MXNet's default for dist_sync). Its
        # copy of the optimizer is pickled at the first step with rescale_grad = 1 / B, so
        # every step passes B and a smaller last batch scales its gradients by B / size.
        self.net, self.trainer = build(
            config, self.data, self.total, kvstore=self.kv, update_on_kvstore=True
        )
        params = self.net.collect_params().values()
        self.grads = [p.grad() for p in params if p.grad_req != "null"]
        self.shares = make_policy(
            "static", workers, self.global_batch, config["min_share"], config["max_share"]
        ).shares
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.books = None
        if index == 0:
            stream = os.fdopen(progress_fd, "w", buffering=1) if progress_fd is not None else None
            self.books = Books(out, config, self.scenario, self.total, self.epochs, stream=stream)
            logging.getLogger("dynalloc.baseline").info(
                "MXNet dist_sync on %s: 1 server, %d workers, equal shares %s, optimizer on the "
                "server",
                HOST,
                workers,
                " ".join(map(str, self.shares)),
            )
        self.burners = None
        if core is not None and any(c.mode == "contention" for c in self.scenario.changes):
            from dynalloc.contention import Burners

            self.burners = Burners(core)

    def train(self):
        iteration = 0
        try:
            for epoch in range(self.epochs):
                began, rows = time.perf_counter(), []
                permutation = self.sampler.permutation(epoch)
                for k in range(self.sampler.batches_per_epoch):
                    if iteration >= self.total:
                        break
                    rows.append(self.iterate(iteration, epoch, k, permutation))
                    iteration += 1
                self.end_epoch(epoch, rows, time.perf_counter() - began)
        finally:
            if self.burners:
                self.burners.stop()
        if self.books:
            self.books.finish(self.net, POLICY)
        (self.work / f"done-{self.index}").touch()

    def iterate(self, iteration, epoch, k, permutation):
        """One iteration; returns its row (wait_s is filled in at the epoch's end)."""
        import mxnet as mx
        from mxnet import autograd

        from dynalloc.timing import ComputeTimer

        shares = self.sampler.shares_for(k, self.shares)
        size = int(np.sum(shares))
        indices = self.sampler.rank_indices(epoch, k, shares, self.index, permutation)
        started = time.perf_counter()
        if self.burners:
            self.burners.set(self.scenario.burners(self.index, iteration))
        rows = np.sort(indices)  # sequential reads of the memory-mapped file
        x = mx.nd.array(self.data.train_x[rows])
        y = mx.nd.array(self.data.train_y[rows])
        factor = self.scenario.factor(self.index, iteration)
        with ComputeTimer(factor) as compute:
            with autograd.record():
                loss = self.loss_fn(self.net(x), y)
            loss.backward()
        loss = float(loss.mean().asscalar())
        if not math.isfinite(loss):
            raise DynallocError(
                f"the loss became {loss} at iteration {iteration} (epoch {epoch}); "
                "lower the learning rate"
            )
        if size != self.global_batch:
            for grad in self.grads:
                grad *= self.global_batch / size
        began = time.perf_counter()
        self.trainer.step(self.global_batch)
        mx.nd.waitall()
        sync_s = time.perf_counter() - began
        if self.books:  # the progress line shows worker 0's loss: the others' come at epoch end
            self.books.progress.update(iteration, epoch, size, shares, loss)
        share = int(shares[self.index])
        elapsed = time.perf_counter() - started
        return (iteration, epoch, self.index, share, compute.seconds, sync_s, 0.0, elapsed, loss,
                factor, POLICY)  # fmt: skip

    def end_epoch(self, epoch, rows, elapsed):
        """Evaluate this worker's test slice and hand its rows to worker 0 through a file; the
        kvstore's barriers order the files and start the next epoch together."""
        sums = eval_sums(self.net, self.loss_fn, self.data, self.index, self.workers)
        write_json(self.epoch_file(epoch, self.index), {"rows": rows, "eval": sums})
        self.kv._barrier()  # every worker's file is written
        if self.books:
            parts = [json.loads(self.epoch_file(epoch, i).read_text()) for i in range(self.workers)]
            rows = with_waits([row for part in parts for row in part["rows"]])
            self.books.add_rows([rows])
            sizes, losses = np.array([r[3] for r in rows]), np.array([r[8] for r in rows])
            loss_sum, correct = np.sum([part["eval"] for part in parts], axis=0)
            n = len(self.data.test_y)
            train_loss = float(np.dot(losses, sizes) / sizes.sum())
            self.books.epoch_done(epoch, elapsed, train_loss, loss_sum / n, correct / n)
        self.kv._barrier()  # worker 0's bookkeeping stays out of the next iteration's sync_s

    def epoch_file(self, epoch, index):
        return self.work / f"epoch-{epoch}-worker-{index}.json"


def die_with_parent():
    """Have the kernel kill this process when the launcher dies (Linux's PR_SET_PDEATHSIG)."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.environ.get(PARENT) and os.getppid() != int(os.environ[PARENT]):
        os._exit(EXIT_FAILED)  # the launcher died before the call


def main(argv=None):
    """The child processes: `python -m dynalloc.baseline ROLE ...` with the DMLC_* variables."""
    parser = argparse.ArgumentParser(prog="python -m dynalloc.baseline")
    parser.add_argument("role", choices=("scheduler", "server", "worker"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--progress-fd", type=int)
    args = parser.parse_args(argv)
    die_with_parent()
    if args.role != "worker":
        import mxnet  # noqa: F401 - with DMLC_ROLE scheduler or server, the import runs it

        return 0
    try:
        Worker(args.out, args.index, args.workers, args.progress_fd).train()
    except BaseException as error:  # noqa: BLE001 - any failure: report it, end this process
        traceback.print_exc()  # into this worker's log
        sys.stderr.flush()
        with contextlib.suppress(OSError):
            (args.out / WORK / f"worker-{args.index}.error").write_text(describe(error) + "\n")
        os._exit(EXIT_FAILED)  # not sys.exit: MXNet's exit handlers wait for the other workers
    return 0


if __name__ == "__main__":
    sys.exit(main())

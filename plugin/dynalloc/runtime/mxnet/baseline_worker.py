"""The processes of `dynalloc baseline`: MXNet's scheduler, server and workers, each started by
`runtime.mxnet.baseline` as `python -m dynalloc.runtime.mxnet.baseline_worker ROLE ...` with the
DMLC_* variables. A worker trains its equal share with the dist_sync kvstore; worker 0 keeps
`dynalloc train`'s books (`dynalloc.runtime.common.books`), so the run directory means the same.
"""

import argparse
import contextlib
import ctypes
import json
import logging
import math
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from dynalloc import rundir
from dynalloc.core.shares import equal_shares
from dynalloc.errors import DynallocError
from dynalloc.rundir import Row
from dynalloc.runtime.common.books import Books
from dynalloc.runtime.common.contention import burners_for
from dynalloc.runtime.common.faults import EXIT_FAILED, describe
from dynalloc.runtime.common.placement import pin_rank
from dynalloc.runtime.common.prepare import prepare
from dynalloc.runtime.common.timing import ComputeTimer
from dynalloc.runtime.mxnet.build import build, eval_sums, ndarrays

POLICY = "dist_sync"  # the policy column of iterations.csv and metrics.json
STATIC = {"name": "static"}
WORK = ".baseline"  # in the run directory: the processes' logs, markers and per-epoch rows
HOST = "127.0.0.1"
PARENT = "DYNALLOC_BASELINE_PARENT"  # the launcher's pid, for the children's death signal
PR_SET_PDEATHSIG = 1


def with_waits(rows):
    """Rows of all workers with wait_s = the iteration's slowest compute_s + data_s minus the
    row's own: train's definition, computed afterwards since workers exchange no times."""
    slowest = {}
    for row in rows:
        busy = row.compute_s + row.data_s
        slowest[row.iteration] = max(slowest.get(row.iteration, -math.inf), busy)
    return [
        row._replace(wait_s=slowest[row.iteration] - row.compute_s - row.data_s) for row in rows
    ]


class Worker:
    """One worker: backward on its equal share, MXNet's dist_sync kvstore sums the gradients and
    its server applies the optimizer; worker 0 keeps the books."""

    def __init__(self, out, index, workers, progress_fd=None):
        self.out, self.work, self.index, self.workers = out, out / WORK, index, workers
        self.setup = setup = prepare(out / rundir.CONFIG, index, workers, policy=STATIC)
        self.config, self.data, self.sampler = setup.config, setup.data, setup.sampler
        self.scenario, self.total = setup.scenario, setup.total
        config = self.config
        self.global_batch = config["global_batch"]
        core = pin_rank(config, index)  # before MXNet starts its threads
        import mxnet as mx
        from mxnet import gluon

        from dynalloc.runtime.common.feed import make_feed

        self.feed = make_feed(setup, index, ndarrays)
        self.kv = mx.kv.create("dist_sync")  # returns once every process has joined
        (self.work / f"ready-{index}").touch()
        # update_on_kvstore: the server runs the optimizer (MXNet's default for dist_sync). Its
        # copy of the optimizer is pickled at the first step with rescale_grad = 1 / B, so
        # every step passes B and a smaller last batch scales its gradients by B / size.
        self.net, self.trainer = build(setup, kvstore=self.kv, update_on_kvstore=True)
        params = self.net.collect_params().values()
        self.grads = [p.grad() for p in params if p.grad_req != "null"]
        self.shares = equal_shares(
            workers, self.global_batch, config["min_share"], config["max_share"]
        )
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.books = None
        if index == 0:
            stream = os.fdopen(progress_fd, "w", buffering=1) if progress_fd is not None else None
            self.books = Books(out, setup, stream=stream)
            logging.getLogger("dynalloc.runtime.mxnet.baseline").info(
                "MXNet dist_sync on %s: 1 server, %d workers, equal shares %s, optimizer on the "
                "server",
                HOST,
                workers,
                " ".join(map(str, self.shares)),
            )
        self.burners = burners_for(self.scenario, core)

    def train(self):
        iteration = 0
        try:
            for epoch in range(self.setup.epochs):
                began, rows = time.perf_counter(), []
                permutation = self.sampler.permutation(epoch)
                for k in range(self.sampler.batches_per_epoch):
                    if iteration >= self.total:
                        break
                    rows.append(self.iterate(iteration, epoch, k, permutation))
                    iteration += 1
                self.end_epoch(epoch, rows, time.perf_counter() - began)
        finally:
            self.feed.close()
            if self.burners:
                self.burners.stop()
        if self.books:
            self.books.finish(self.net.save_parameters, POLICY)
        (self.work / f"done-{self.index}").touch()

    def iterate(self, iteration, epoch, k, permutation):
        """One iteration; returns its row (wait_s is filled in at the epoch's end)."""
        import mxnet as mx
        from mxnet import autograd

        shares = self.sampler.shares_for(k, self.shares)
        size = int(np.sum(shares))
        indices = self.sampler.rank_indices(epoch, k, shares, self.index, permutation)
        started = time.perf_counter()
        if self.burners:
            self.burners.set(self.scenario.burners(self.index, iteration))
        fetched = time.perf_counter()
        x, y = self.feed.batch(epoch, k, iteration, shares, indices)
        data_s = time.perf_counter() - fetched
        factor = self.scenario.factor(self.index, iteration)
        with ComputeTimer(factor, mx.nd.waitall) as compute:
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
        return Row(
            iteration=iteration,
            epoch=epoch,
            rank=self.index,
            batch_size=share,
            compute_s=compute.seconds,
            sync_s=sync_s,
            wait_s=0.0,  # with_waits fills it in from every worker's rows
            iteration_s=elapsed,
            loss=loss,
            slowdown=factor,
            policy=POLICY,
            data_s=data_s,
            ranks=len(shares),
        )

    def end_epoch(self, epoch, rows, elapsed):
        """Evaluate this worker's test slice and hand its rows to worker 0 through a file; the
        kvstore's barriers order the files and start the next epoch together."""
        sums = eval_sums(self.net, self.loss_fn, self.feed, self.index, self.workers)
        rundir.write_json(self.epoch_file(epoch, self.index), {"rows": rows, "eval": sums})
        self.kv._barrier()  # every worker's file is written
        if self.books:
            parts = [json.loads(self.epoch_file(epoch, i).read_text()) for i in range(self.workers)]
            rows = with_waits([Row(*row) for part in parts for row in part["rows"]])
            self.books.add_rows([rows])
            sizes = np.array([row.batch_size for row in rows])
            losses = np.array([row.loss for row in rows])
            loss_sum, correct = np.sum([part["eval"] for part in parts], axis=0)
            n = self.data.test_size
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
    """The child processes: `python -m dynalloc.runtime.mxnet.baseline_worker ROLE ...` with the
    DMLC_* variables."""
    parser = argparse.ArgumentParser(prog="python -m dynalloc.runtime.mxnet.baseline_worker")
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

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

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dynalloc import rundir
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.prepare import prepare
from dynalloc.runtime.common.runlock import RunLock
from dynalloc.runtime.mxnet.baseline_worker import HOST, PARENT, STATIC, WORK
from dynalloc.runtime.mxnet.build import build

START_TIMEOUT_S = 180  # every worker joined the kvstore (four MXNet imports on a busy machine)
EXIT_TIMEOUT_S = 60  # the processes still running once every worker finished its work
POLL_S = 0.1


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML), as for dynalloc train")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--workers", type=int, required=True, help="worker processes (R)")


def run(args):
    if args.workers < 1:
        raise DynallocError(f"--workers must be at least 1, got {args.workers}")
    policy = load_config(args.config).get("policy")
    name = policy.get("name") if isinstance(policy, dict) else policy
    setup = prepare(args.config, 0, args.workers, policy=STATIC)
    build(setup)  # a bad model or optimizer fails here, not in R workers
    config = setup.config
    out = Path(args.out)
    with RunLock(out) as lock:  # one training per run directory, as for `dynalloc train`
        if lock.note:
            sys.stderr.write(f"dynalloc baseline: {lock.note}\n")
        open_run_dir(out, config)
        if name not in (None, "static"):
            sys.stderr.write(
                f"dynalloc baseline: policy {name!r} ignored: dist_sync splits equally\n"
            )
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
    rundir.prepare(out, config)
    try:
        checkpoint.remove_all(out)
        shutil.rmtree(out / WORK, ignore_errors=True)
        (out / WORK).mkdir()
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
        command = [sys.executable, "-m", "dynalloc.runtime.mxnet.baseline_worker", role, *arguments]
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

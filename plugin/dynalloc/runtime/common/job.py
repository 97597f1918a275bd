"""A training launch, supervised: `dynalloc supervise -- LAUNCHER ... > LOG 2>&1`.

The train rule runs `python -m dynalloc.runtime.common.job --attempt N --status FILE -- LAUNCHER
... > LOG 2>&1`; this process starts the launcher (mpiexec, srun, `dynalloc baseline`) as its
child, which writes to the same log (read back for which ranks a launch lost: a pipe between
them would end the launcher with SIGPIPE, before its ranks checkpoint, were this process killed
outright), and:
- stops the training when the `snakemake` that started it dies (SIGKILL, a lost login shell): the
  launcher and ranks would otherwise be re-parented and train on, and the documented recovery
  (`snakemake --unlock && snakemake --rerun-incomplete`) would start a second training beside
  them. Snakemake's pid comes from DYNALLOC_SNAKEMAKE (`PID@HOST`, set by `announce_snakemake`
  when rules/common.smk is read). Under SLURM the job runs its own `snakemake` inside the
  allocation, which is the one watched: the job belongs to the scheduler and outlives a login
  node's snakemake, and the run directory's lock refuses a second training while it runs;
- ends the job when a rank reports a stall (SIGUSR1, `runtime.common.stall`): srun cannot end a
  step while one of its nodes is unreachable;
- launches the training again at once on the ranks that remain after some were lost, where the
  run config's `elastic` section allows it (`runtime.common.elastic`);
- lets Snakemake retry only what a rerun cures. Snakemake's `retries` retries every failure
  alike (its retries know no exit codes), so the exit code of each attempt is kept in FILE, and
  attempt N > 1 starts only after a stop (EXIT_STOPPED: a time limit, a preemption, a signal) or a
  stall (EXIT_STALLED); after any other failure it ends at once with the same code, showing the
  end of the failed attempt's output.
This process is single-threaded, so PR_SET_PDEATHSIG, which fires when the thread that started a
child ends, also stops the launcher should this process be killed outright.
"""

import argparse
import contextlib
import ctypes
import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write
from dynalloc.runtime.common.elastic import Elastic
from dynalloc.runtime.common.faults import EXIT_STALLED, EXIT_STOPPED

SNAKEMAKE_VARIABLE = "DYNALLOC_SNAKEMAKE"  # PID@HOST of the snakemake to outlive no longer
JOB_VARIABLE = "DYNALLOC_JOB"  # PID@HOST of this process, for the ranks to report a stall
RETRIED = (EXIT_STOPPED, EXIT_STALLED)
STALL_GRACE_S = 5.0  # a stalled launcher's time to end by itself before it is killed
TAIL_LINES = 20
PR_SET_PDEATHSIG = 1


def add_arguments(parser):
    parser.add_argument("--attempt", type=int, default=1, help="Snakemake's attempt number")
    parser.add_argument(
        "--status", help="file keeping the exit code of a failed attempt, for the next one"
    )
    parser.add_argument("command", nargs="+", help="the launcher and its arguments (after --)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m dynalloc.runtime.common.job")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except DynallocError as error:
        say(f"error: {error}")
        return 2


def run(args):
    status = Path(args.status) if args.status else None
    previous = read_status(status) if status else None
    if args.attempt == 1 or previous is None:
        if status:
            status.unlink(missing_ok=True)
    elif previous["code"] not in RETRIED:
        return refuse(args.attempt, previous)
    command, elastic = args.command, Elastic.of(args.command)
    output = Output()
    if elastic is not None and output.path is None:
        raise DynallocError(
            "an elastic run's output must go to a file (add > train.log 2>&1): the restarts "
            "read from it which ranks a launch lost"
        )
    while True:
        began = output.size()
        supervisor = Supervisor(command)
        code = supervisor.run()
        if code == 0 or elastic is None or supervisor.stop:
            break
        command, why = elastic.restart(command, output.since(began))
        say(why)
        if command is None:
            break
    if code != 0 and status:
        write_status(status, args.attempt, code, output.since(0))
    return code


class Output:
    """This process's stdout, where the launcher writes too, read back when it is a file."""

    def __init__(self):
        try:
            path = Path(os.readlink("/proc/self/fd/1"))
            self.path = path if path.is_file() else None
        except OSError:
            self.path = None

    def size(self):
        sys.stdout.flush()
        return os.fstat(1).st_size if self.path else 0

    def since(self, offset):
        """What was written from `offset` on ("" where stdout is no file)."""
        if self.path is None:
            return ""
        sys.stdout.flush()
        with contextlib.suppress(OSError), open(self.path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
        return ""


def say(message):
    sys.stderr.write(f"dynalloc job: {message}\n")
    sys.stderr.flush()


def refuse(attempt, previous):
    """End attempt `attempt` at once: the previous one failed in a way a rerun does not cure."""
    lines = "".join(f"  {line}\n" for line in previous["tail"])
    sys.stderr.write(
        f"dynalloc job: attempt {attempt} not started: attempt {previous['attempt']} ended with "
        f"exit code {previous['code']}, which a rerun does not cure (only a stop, exit "
        f"{EXIT_STOPPED}, and a stall, exit {EXIT_STALLED}, are retried). Its log ended:\n{lines}"
    )
    return previous["code"]


class Supervisor:
    """The launcher as a child, watched together with snakemake and this process's signals."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)

    def __init__(self, command):
        self.command = command
        self.stop = None  # why the launcher was asked to stop, once it was
        self.stalled = None  # when a rank reported a stall

    def run(self):
        """Start the launcher, supervise it until it ends; returns the job's exit code. (A
        signal before the handlers are in place kills this process, and so SIGTERMs the
        launcher: the same end.)"""
        env = {**os.environ, JOB_VARIABLE: f"{os.getpid()}@{socket.gethostname()}"}
        try:
            self.child = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=functools.partial(_die_with, os.getpid()),
            )
        except OSError as error:
            raise DynallocError(f"cannot start {self.command[0]}: {error.strerror}") from None
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        handlers = {number: signal.signal(number, self._signal) for number in self.SIGNALS}
        try:
            self._supervise(wake_r)
        finally:
            signal.set_wakeup_fd(-1)
            for number, handler in handlers.items():
                signal.signal(number, handler)
            os.close(wake_r)
            os.close(wake_w)
        return self._exit_code(self.child.returncode)

    def _signal(self, number, frame):
        if number == signal.SIGUSR1:
            self.stalled = self.stalled or time.monotonic()
        else:
            self._ask_to_stop(signal.Signals(number).name)

    def _ask_to_stop(self, why):
        """SIGTERM to the launcher, once: it forwards it to the ranks, which checkpoint and end
        with EXIT_STOPPED (a rank that also got the signal itself takes both as one)."""
        if self.stop is None:
            self.stop = why
            with contextlib.suppress(ProcessLookupError):
                self.child.send_signal(signal.SIGTERM)

    def _supervise(self, wake):
        watched = snakemake_pidfd()
        child = os.pidfd_open(self.child.pid)
        try:
            poller = select.poll()
            for fd in (wake, child, *([watched] if watched is not None else [])):
                poller.register(fd, select.POLLIN)
            while self.child.poll() is None:
                ready = {fd for fd, _ in poller.poll(500)}
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 64)
                if watched is not None and watched in ready:
                    poller.unregister(watched)
                    say("the snakemake that started this job ended: stopping the training")
                    self._ask_to_stop("the end of snakemake")
                if self.stalled and time.monotonic() - self.stalled > STALL_GRACE_S:
                    self.child.kill()  # srun waits for unreachable nodes
        finally:
            os.close(child)
            if watched is not None:
                os.close(watched)

    def _exit_code(self, returncode):
        code = 128 - returncode if returncode < 0 else returncode
        if self.stalled:
            return EXIT_STALLED
        if self.stop and code in (EXIT_STOPPED, 128 + signal.SIGTERM, 128 + signal.SIGKILL):
            return EXIT_STOPPED  # srun reports a time limit as its own SIGTERM
        return code


def announce_snakemake():
    """Called by the Snakefile: make this process (snakemake) the one its jobs watch."""
    os.environ[SNAKEMAKE_VARIABLE] = f"{os.getpid()}@{socket.gethostname()}"


def snakemake_pidfd():
    """A pidfd of the snakemake named in DYNALLOC_SNAKEMAKE when it runs on this host, else
    None (another host's pid means nothing here)."""
    pid, _, host = os.environ.get(SNAKEMAKE_VARIABLE, "").partition("@")
    if not pid.isdigit() or host != socket.gethostname():
        return None
    try:
        return os.pidfd_open(int(pid))
    except ProcessLookupError:
        return None


def report_stall():
    """Tell this job's supervisor that the ranks stalled, when it runs on this host."""
    pid, _, host = os.environ.get(JOB_VARIABLE, "").partition("@")
    if pid.isdigit() and host == socket.gethostname():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(pid), signal.SIGUSR1)


def read_status(path):
    """The previous attempt's {attempt, code, tail}, or None."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_status(path, attempt, code, output):
    lines = output.splitlines()[-TAIL_LINES:]
    with atomic_write(path) as handle:
        json.dump({"attempt": attempt, "code": code, "tail": lines}, handle)


def _die_with(parent):
    """In the child, before exec: SIGTERM once `parent` (this process) dies; the ranks then
    checkpoint."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the call
        os._exit(EXIT_STOPPED)


if __name__ == "__main__":
    sys.exit(main())

"""Failing fast and stopping cleanly: what a rank does when it, a peer or the scheduler ends a run.

Blocking collectives have no timeout, so a rank that dies or gives up would leave the others
waiting forever. Three mechanisms prevent it:
- a rank that raises aborts the whole job (`MPI_Abort`) after printing its own message;
- on each host a watch process beside every rank notices a local peer that vanished (SIGKILL,
  OOM killer) and ends its rank with a line naming the lost one (`runtime.common.peerwatch`;
  the launcher, mpiexec or srun, ends the ranks on other hosts);
- SIGTERM (a scheduler's time limit) or SIGINT only sets a flag: the ranks agree on it in the
  next iteration's timing exchange, finish that iteration, checkpoint and exit with
  EXIT_STOPPED. A second signal has its default effect, unless it comes within SAME_REQUEST_S of
  the first: at a time limit SLURM signals every rank and srun forwards the signal again, so a
  rank gets two at once;
- a stall (a node cut off, a rank that stopped without dying) ends every rank with EXIT_STALLED
  (`dynalloc.runtime.common.stall`).
"""

import os
import signal
import socket
import sys
import time
import traceback

from dynalloc.errors import DynallocError
from dynalloc.launcher import launcher_rank

# sysexits' EX_TEMPFAIL: stopped on request after a checkpoint; running again resumes.
EXIT_STOPPED = 75
# sysexits' EX_UNAVAILABLE: peers stopped answering (`runtime.common.stall`); running again
# resumes from the last checkpoint.
EXIT_STALLED = 69
EXIT_FAILED = 2
SAME_REQUEST_S = 1.0  # signals this close together are one request (a launcher forwarding it)


class Stopped(Exception):
    """Every rank agreed to stop after a signal; raised once the checkpoint is written."""

    def __init__(self, signal_name, iteration, checkpoint):
        super().__init__(
            f"stopped by {signal_name} after iteration {iteration}; checkpoint {checkpoint} "
            "written; run the same command again to resume"
        )


class StopRequest:
    """SIGTERM and SIGINT handlers that only record the request, to be honoured between
    iterations (a handler cannot run inside a collective anyway).

    Python runs a handler only once the main thread is back in the interpreter, which a rank
    blocked in a collective never is; `arrived()` tells another thread (the stall watch) when a
    signal came all the same, from the byte Python's C-level handler writes to the wakeup fd."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signal_name = self.when = self.seen = None
        self.previous = {}
        self.wakeup = self.previous_wakeup = None

    def __enter__(self):
        for number in self.SIGNALS:
            self.previous[number] = signal.signal(number, self._handle)
        self.wakeup = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.previous_wakeup = signal.set_wakeup_fd(self.wakeup[1], warn_on_full_buffer=False)
        return self

    def __exit__(self, *exc):
        signal.set_wakeup_fd(self.previous_wakeup)
        for fd in self.wakeup:
            os.close(fd)
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def arrived(self):
        """time.monotonic() when the first SIGTERM or SIGINT arrived (to within a call of this
        method), or None; callable from any thread."""
        if self.seen is None:
            try:
                numbers = os.read(self.wakeup[0], 256)
            except (BlockingIOError, OSError):
                numbers = b""
            if any(number in self.SIGNALS for number in numbers):
                self.seen = time.monotonic()
        times = [t for t in (self.when, self.seen) if t is not None]
        return min(times) if times else None

    def _handle(self, number, frame):
        now = time.monotonic()
        if self.signal_name is None:
            self.signal_name, self.when = signal.Signals(number).name, now
        elif now - self.when > SAME_REQUEST_S:  # a second request stops at once
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)

    @property
    def requested(self):
        return self.signal_name is not None


def identity():
    """(host, pid) of this process, gathered from every rank for the peer watch and the log."""
    return socket.gethostname(), os.getpid()


def agree(comm, setup):
    """Run `setup` on every rank; if it fails on any, every rank raises that rank's error, so
    no rank waits in a collective for one that already gave up."""
    try:
        result, message = setup(), None
    except DynallocError as error:
        result, message = None, str(error)
    messages = [m for m in comm.allgather(message) if m]
    if messages:
        raise DynallocError(messages[0])
    return result


def fail(error):
    """End this rank as the command line ends it for bad input: rank 0 says it in one line."""
    if launcher_rank() == 0:
        sys.stderr.write(f"dynalloc train: error: {error}\n")
    raise SystemExit(EXIT_FAILED) from None


def abort(comm, rank, error, log=None):
    """Report `error` as this rank's and end the whole job: a rank that returned instead would
    leave the others in their next collective forever."""
    message = describe(error)
    if log is not None:
        log.error("rank %d failed: %s\n%s", rank, message, traceback.format_exc())
    sys.stderr.write(f"dynalloc train: error: rank {rank}: {message}\n")
    sys.stderr.flush()
    time.sleep(0.5)  # launchers drop what a process wrote just before it exits
    comm.Abort(EXIT_FAILED)
    # MPICH's MPI_Abort returned here under mpiexec (seen with two ranks): the error then went
    # on to the command line and was said a second time. Nothing is left to do but end.
    os._exit(EXIT_FAILED)


def describe(error):
    """One line for any failure: our own errors say it all, others get their type and place."""
    if isinstance(error, DynallocError):
        return str(error)
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" ({os.path.basename(last[0].filename)}:{last[0].lineno})" if last else ""
    return f"{type(error).__name__}: {error}{where}"

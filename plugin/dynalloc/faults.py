"""Failing fast and stopping cleanly: what a rank does when it, a peer or the scheduler ends a run.

Blocking collectives have no timeout, so a rank that dies or gives up would leave the others
waiting forever. Three mechanisms prevent it:
- a rank that raises aborts the whole job (`MPI_Abort`) after printing its own message;
- on each host a watchdog thread notices a local peer process that vanished (SIGKILL, OOM
  killer) and stops its rank with a line naming the lost rank (the launcher, mpiexec or srun,
  then ends the others, as it also does across hosts);
- SIGTERM (a scheduler's time limit) or SIGINT only sets a flag: the ranks agree on it in the
  next iteration's timing exchange, finish that iteration, checkpoint and exit with
  EXIT_STOPPED. A second signal has its default effect.
"""

import os
import select
import signal
import socket
import sys
import threading
import time
import traceback

from dynalloc.errors import DynallocError

# sysexits' EX_TEMPFAIL: stopped on request after a checkpoint; running again resumes.
EXIT_STOPPED = 75
EXIT_FAILED = 2
EXIT_LOST = 3
WATCH_INTERVAL_S = 0.05  # where there are no pidfds to sleep on


class Stopped(Exception):
    """Every rank agreed to stop after a signal; raised once the checkpoint is written."""

    def __init__(self, signal_name, iteration, checkpoint):
        super().__init__(
            f"stopped by {signal_name} after iteration {iteration}; checkpoint {checkpoint} "
            "written; run the same command again to resume"
        )


class StopRequest:
    """SIGTERM and SIGINT handlers that only record the request, to be honoured between
    iterations (a handler cannot run inside a collective anyway)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signal_name = None
        self.previous = {}

    def __enter__(self):
        for number in self.SIGNALS:
            self.previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def _handle(self, number, frame):
        self.signal_name = signal.Signals(number).name
        signal.signal(number, signal.SIG_DFL)  # a second one stops at once

    @property
    def requested(self):
        return self.signal_name is not None


def identity():
    """(host, pid) of this process, gathered from every rank for the watchdog and the log."""
    return socket.gethostname(), os.getpid()


class PeerWatch:
    """A daemon thread that exits this process, naming the rank, when a peer process on the
    same host disappears. It sleeps on pidfds (Linux 5.3+), so it costs nothing while the peers
    live and wakes at once when one dies, ahead of MPI's own error path; without pidfds it
    polls. Peers on other hosts are the launcher's to watch."""

    def __init__(self, rank, identities):
        host = identities[rank][0]
        self.peers = {r: pid for r, (h, pid) in enumerate(identities) if h == host and r != rank}
        self.thread = threading.Thread(target=self._watch, name="dynalloc-peer-watch", daemon=True)
        self.done = threading.Event()

    def __enter__(self):
        if self.peers:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.disarm()

    def disarm(self):
        """Stop watching before the final barrier: past it, peers exit."""
        self.done.set()

    def _watch(self):
        try:
            descriptors = {os.pidfd_open(pid): rank for rank, pid in self.peers.items()}
        except (AttributeError, OSError):  # no pidfds here (old kernel, not Linux)
            descriptors = {}
        poller = select.poll()
        for fd in descriptors:
            poller.register(fd, select.POLLIN)
        while not self.done.is_set():
            ready = poller.poll(1000) if descriptors else self._poll_proc()
            lost = [descriptors[fd] for fd, _ in ready] if descriptors else ready
            if lost and not self.done.is_set():
                self._report(lost[0])

    def _poll_proc(self):
        time.sleep(WATCH_INTERVAL_S)
        return [rank for rank, pid in self.peers.items() if not alive(pid)]

    def _report(self, rank):
        sys.stderr.write(
            f"dynalloc train: error: rank {rank} (pid {self.peers[rank]}) was lost (killed or "
            "crashed); stopping the other ranks\n"
        )
        sys.stderr.flush()
        time.sleep(0.5)  # launchers drop what a process wrote just before it exits
        os._exit(EXIT_LOST)


def alive(pid):
    """False once `pid` has exited (a zombie counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        if os.path.isdir("/proc"):
            return False
    try:  # no /proc: a signal probe
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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


def describe(error):
    """One line for any failure: our own errors say it all, others get their type and place."""
    if isinstance(error, DynallocError):
        return str(error)
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" ({os.path.basename(last[0].filename)}:{last[0].lineno})" if last else ""
    return f"{type(error).__name__}: {error}{where}"

"""The peer watch: a small process beside each rank that names a local peer which vanished
(SIGKILL, OOM killer, a crash) and ends its own rank.

Blocking collectives have no timeout, so without it the survivors of a lost rank would wait
forever. It is a process, in a session of its own, rather than a thread of the rank: Hydra's
mpiexec SIGKILLs the survivors' process groups within milliseconds of a rank killed by a signal
(with or without -disable-auto-cleanup), and a thread had to win that race to say anything; under
load it sometimes lost and the job ended without a word about which rank was lost. The watch
outlives its rank by the moments it takes to write the line to the rank's stderr, then SIGKILLs
the rank if it still runs (srun leaves survivors alive). It sleeps on pidfds (Linux 5.3+), so it
costs nothing while the peers live; without pidfds it polls. Peers on other hosts are the
launcher's to watch.

Run as `python -m dynalloc.runtime.common.peerwatch RANK_PID PEER_RANK=PEER_PID ...`; ranks start it
through `PeerWatch`.
"""

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

WATCH_INTERVAL_S = 0.05  # where there are no pidfds to sleep on


class PeerWatch:
    """This rank's watch process, started on entering and stopped by `disarm`."""

    def __init__(self, rank, identities):
        host = identities[rank][0]
        self.peers = {r: pid for r, (h, pid) in enumerate(identities) if h == host and r != rank}
        self.process = None
        self.peer_watches = []

    def __enter__(self):
        if self.peers:
            pairs = [f"{rank}={pid}" for rank, pid in self.peers.items()]
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(os.getpid()), *pairs],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # out of reach of the launcher's kill of this rank's group
            )
        return self

    def __exit__(self, *exc):
        self.disarm()

    @property
    def pid(self):
        """The watch process's pid; None where this rank has no local peers."""
        return self.process.pid if self.process else None

    def meet(self, watch_pids):
        """Take every rank's watch pid (an allgather of `pid`), for `disarm_host`."""
        self.peer_watches = [watch_pids[rank] for rank in self.peers if watch_pids[rank]]

    def disarm(self):
        """Stop watching before the final barrier: past it, peers exit."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def disarm_host(self):
        """Stop every watch on this host: a rank about to abort the job ends its peers itself,
        and none of them is lost."""
        self.disarm()
        for pid in self.peer_watches:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.peer_watches = []


def watch(rank_pid, peers):
    """Wait until a peer or the rank itself ends; on a lost peer, name it and end the rank."""
    lost = wait_for_loss(rank_pid, peers)
    if not lost:
        return
    try:
        for rank in lost:
            sys.stderr.write(
                f"dynalloc train: error: rank {rank} (pid {peers[rank]}) was lost (killed or "
                "crashed); stopping the other ranks\n"
            )
        sys.stderr.flush()
    except OSError:  # nobody reads the rank's stderr any more: the rank must end all the same
        pass
    with contextlib.suppress(ProcessLookupError):  # else the launcher was faster
        os.kill(rank_pid, signal.SIGKILL)


def wait_for_loss(rank_pid, peers):
    """The ranks of the peers gone when the watch wakes; [] when the watched rank ended first."""
    try:
        rank_fd = os.pidfd_open(rank_pid)
    except ProcessLookupError:
        return []
    except (AttributeError, OSError):  # no pidfds here (old kernel, not Linux)
        return poll_proc(rank_pid, peers)
    descriptors, gone = {}, []
    for rank, pid in peers.items():
        try:
            descriptors[os.pidfd_open(pid)] = rank
        except ProcessLookupError:
            gone.append(rank)
    if gone:
        return gone
    poller = select.poll()
    for fd in (rank_fd, *descriptors):
        poller.register(fd, select.POLLIN)
    ready = [fd for fd, _ in poller.poll()]
    return sorted(descriptors[fd] for fd in ready if fd in descriptors)


def poll_proc(rank_pid, peers):
    while True:
        gone = [rank for rank, pid in peers.items() if not alive(pid)]
        if gone or not alive(rank_pid) or os.getppid() != rank_pid:
            return gone
        time.sleep(WATCH_INTERVAL_S)


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


def main(argv):
    rank_pid = int(argv[0])
    peers = {int(rank): int(pid) for rank, pid in (pair.split("=") for pair in argv[1:])}
    watch(rank_pid, peers)


if __name__ == "__main__":
    main(sys.argv[1:])

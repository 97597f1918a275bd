"""Stall detection: a thread beside each rank that ends the job when the training stops making
progress, naming the ranks that stopped answering.

A blocking MPI collective has no timeout. When a node's link goes down, or a rank stops without
dying (SIGSTOP, a hung driver), every other rank waits in its next collective for as long as TCP
takes to give up (minutes) or forever: MPICH raises nothing, and the peer watch sees only
processes that end on its own host. This thread watches the training's progress instead: the
Recorder beats after every iteration, evaluation batch and checkpoint. When no beat comes within
the bound, max(stall_timeout, FACTOR x the longest interval between two beats so far), the ranks
have stalled. The bound is armed once the first iteration completed (nothing predicts MXNet's
warm-up), and only while the Recorder's own code runs: a script's own code between epochs is not
watched. Once a signal asked the ranks to stop, they agree on it in the next iteration; when that
iteration does not complete within STOP_FACTOR x the longest interval (at least STOP_FLOOR_S), a
peer is gone (srun's --kill-on-bad-exit signals the survivors of a lost rank), and waiting the
whole bound would only delay the end.

On a stall each rank's thread sends every other rank a datagram with the number of iterations it
completed, and answers theirs, for ANSWER_S; the lowest rank that hears from any (or is alone)
prints one line naming the silent ranks, tells the others it did, and every rank ends with
EXIT_STALLED. A rank that hears a peer stall stalls at once: each rank measures its own bound
(rank 0, which writes the checkpoints, has the longest intervals), and the launcher ends the
whole job as the first rank exits, so a lowest rank whose own bound had not yet passed would
never print its line (seen in CI). The others wait for its word, at most ANSWER_S, to exit.
The datagrams are UDP, not MPI: a rank blocked in a collective can hold MPICH's lock for good
(seen with libfabric once a peer had died), and then no other thread of it gets an MPI call
through. Each rank sends to every IPv4 address of the peer's host (gathered at the start), since
which of them the peer can be reached at is not known; a job's datagrams carry its token, so no
other job's count. None writes a checkpoint: that takes every rank's state, and MPI offers no
way out of a blocked collective; the rerun resumes from the last checkpoint (`checkpoint.every`
bounds what is lost).
"""

import contextlib
import fcntl
import os
import socket
import struct
import sys
import threading
import time

from dynalloc.runtime.common.faults import EXIT_STALLED

FACTOR = 10  # the bound over the longest interval between two signs of progress
STOP_FACTOR, STOP_FLOOR_S = 3, 5.0  # the bound once a stop was requested
ANSWER_S = 2.0  # how long a stalled rank listens for the others
POLL_S = 0.2  # how often the thread looks at the clock
# kind (b"S" stalled, b"H" here, b"D" the line is written), token, rank, iterations, the bound
# that passed (S only)
MESSAGE = struct.Struct("!c16sIqd")
SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def stall_bound(timeout, longest, stopping=False):
    """Seconds without progress that mean a stall: `timeout` (stall_timeout) or FACTOR times the
    `longest` interval between two beats, whichever is larger; shorter once a stop was
    requested. None while nothing has been measured yet (before the first iteration)."""
    if longest is None:
        return None
    bound = max(timeout, FACTOR * longest)
    return min(bound, max(STOP_FLOOR_S, STOP_FACTOR * longest)) if stopping else bound


def host_addresses():
    """This host's IPv4 addresses, loopback last."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            with contextlib.suppress(OSError):  # an interface without an IPv4 address
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
                found.append(socket.inet_ntoa(reply[20:24]))
    return sorted(set(found), key=lambda address: (address.startswith("127."), address))


class StallWatch:
    """The stall watch of one rank. Collective to create (every rank's addresses are gathered
    over `comm`); `beat()` after every sign of progress, `watching()` around the code it
    watches, `close()` at the end.

    identities: every rank's (host, pid), for the line. timeout: stall_timeout (seconds; None
    turns the watch off). stop_time: a callable, the time.monotonic() at which a signal asked
    this rank to stop, or None. on_stall: called once the line is written, before the rank ends
    (to stand down the host's peer watches and tell the job's supervisor)."""

    def __init__(self, comm, identities, timeout, stop_time, on_stall):
        self.identities, self.timeout = identities, timeout
        self.stop_time, self.on_stall = stop_time, on_stall
        self.rank = comm.Get_rank()
        self.iterations = 0  # completed, as the Recorder counts them
        self.armed = 0
        self.last = self.longest = None
        self.closed = threading.Event()
        self.thread = None
        if timeout is None:
            return
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("0.0.0.0", 0))
        self.socket.settimeout(POLL_S)
        self.token = comm.bcast(os.urandom(16), root=0)
        port = self.socket.getsockname()[1]
        self.peers = {
            rank: [(address, port) for address in addresses]
            for rank, (addresses, port) in enumerate(comm.allgather((host_addresses(), port)))
            if rank != self.rank
        }
        self.heard = {}  # rank -> iterations completed, of the peers heard from (after a stall)
        self.peer_bound = None  # the stall bound that passed on the first peer heard to stall
        self.written = False  # the lowest rank answering wrote the line
        self.thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self.thread.start()

    @contextlib.contextmanager
    def watching(self):
        """Watch the enclosed code; an interval starts afresh on entering."""
        self.armed += 1
        self.last = time.monotonic()
        try:
            yield
        finally:
            self.armed -= 1

    def beat(self, iterations=None):
        """A sign of progress (`iterations`: the iterations completed so far, when it changed)."""
        now = time.monotonic()
        if self.armed and self.last is not None:
            self.longest = max(self.longest or 0.0, now - self.last)
        self.last = now
        if iterations is not None:
            self.iterations = iterations

    def close(self):
        """Stop watching: the run ended, or fails in a way that ends it anyway."""
        self.closed.set()
        if self.thread is not None:
            self.thread.join(2 * ANSWER_S + 1.0)
            self.socket.close()

    def _watch(self):
        while not self.closed.is_set():
            self._receive()  # waits up to POLL_S
            now, last, asked = time.monotonic(), self.last, self.stop_time()
            stopping = asked is not None and last is not None and asked >= last
            bound = stall_bound(self.timeout, self.longest, stopping)
            if self.peer_bound is not None:  # the job ends: whatever this rank was doing
                self._stalled(now - (last or now), self.peer_bound)
            elif self.armed and bound is not None and now - last > bound:
                self._stalled(now - last, bound)

    def _receive(self):
        """Take one datagram of this job, answering a peer that stalled."""
        try:
            data, sender = self.socket.recvfrom(MESSAGE.size)
            kind, token, rank, iterations, bound = MESSAGE.unpack(data)
        except (TimeoutError, OSError, struct.error):
            return
        if token != self.token or rank not in self.peers:
            return
        self.heard[rank] = iterations
        if kind == b"S":
            self._send(b"H", [sender])
            if self.peer_bound is None:
                self.peer_bound = bound
        elif kind == b"D":
            self.written = True

    def _send(self, kind, addresses, bound=0.0):
        data = MESSAGE.pack(kind, self.token, self.rank, self.iterations, bound)
        for address in addresses:
            with contextlib.suppress(OSError):  # an address this host cannot reach
                self.socket.sendto(data, address)

    def _stalled(self, waited, bound):
        for addresses in self.peers.values():
            self._send(b"S", addresses, bound)
        deadline = time.monotonic() + ANSWER_S
        while time.monotonic() < deadline and len(self.heard) < len(self.peers):
            self._receive()
        heard = dict(self.heard)
        if self.rank == min([self.rank, *heard]):
            sys.stderr.write(self.describe(waited, bound, heard) + "\n")
            sys.stderr.flush()
            for rank in heard:
                self._send(b"D", self.peers[rank])
        else:  # the lowest rank answering writes the line: exiting first could end it unwritten
            deadline = time.monotonic() + ANSWER_S
            while time.monotonic() < deadline and not self.written:
                self._receive()
        if not self.closed.is_set():  # the run did not end meanwhile
            self.on_stall()
            os._exit(EXIT_STALLED)

    def describe(self, waited, bound, heard):
        """The one line: how long nothing progressed, and which ranks stopped answering."""
        silent = [r for r in self.peers if r not in heard]
        if silent:
            named = ", ".join(
                f"{r} (pid {self.identities[r][1]} on {self.identities[r][0]})" for r in silent
            )
            who = f"rank{'s' if len(silent) > 1 else ''} {named} stopped answering"
        else:
            behind = sorted(r for r, done in heard.items() if done < self.iterations)
            who = (
                f"every rank answered; behind the others: {', '.join(map(str, behind))}"
                if behind
                else "every rank answered: one is stuck outside MPI (a hung read, a library call)"
            )
        return (
            f"dynalloc train: error: rank {self.rank}: no progress for {waited:.1f} s after "
            f"{self.iterations} iterations (stall bound {bound:.1f} s): {who}; ending the job "
            f"(exit {EXIT_STALLED}); rerun to resume from the last checkpoint"
        )

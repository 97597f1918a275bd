"""How a run's ranks watch each other while it runs, and how they end it together: a signal
(a scheduler's time limit) is a stop request the ranks agree on, which checkpoints and exits 75;
a local peer that vanished is named by the peer watch; no progress within the stall bound ends
every rank with exit 69 and tells the job's supervisor; a rank that raises aborts the job with
its own one line (`faults`, `peerwatch`, `stall`). The Recorder holds one for its run."""

import sys

from dynalloc.errors import SharedError
from dynalloc.runtime.common.faults import EXIT_STOPPED, Stopped, StopRequest, abort, fail
from dynalloc.runtime.common.job import report_stall
from dynalloc.runtime.common.peerwatch import PeerWatch
from dynalloc.runtime.common.stall import StallWatch


class RunGuard:
    """This rank's watches of the run, entered at once: `stop` (signals), the peer watch and
    `stall` (no progress); `end` closes them as the run ends."""

    def __init__(self, comm, rank, identities, stall_timeout):
        self.comm, self.rank = comm, rank
        self.stop = StopRequest().__enter__()
        self.watch = PeerWatch(rank, identities).__enter__()
        self.watch.meet(comm.allgather(self.watch.pid))
        self.stall = StallWatch(comm, identities, stall_timeout, self.stop.arrived, self._stalled)

    def _stalled(self):
        """The stall watch's last act before this rank ends: every rank of the host ends now, so
        none of them is lost to the peer watches; the job's supervisor hears of it."""
        self.watch.disarm_host()
        report_stall()

    def end(self, kind, error, trace, log=None):
        """Close the watches as the run ends with `error` (of class `kind`, or none): returns
        True when it ended well (every rank past the last barrier); raises SystemExit(75) after
        a stop request, ends the job with one line after a shared error, aborts it after any
        other (`log`: rank 0's train.log, which gets the error too)."""
        if kind is None or isinstance(error, Stopped | SharedError):
            self.watch.disarm()  # peers that exit after the barrier are done, not lost
            with self.stall.watching():
                self.comm.Barrier()
        self.stall.close()
        self.stop.__exit__(kind, error, trace)  # after the stall watch, which reads its pipe
        if kind is None:
            return True
        if isinstance(error, Stopped):
            if self.rank == 0:
                if log is not None:
                    log.info("%s", error)
                sys.stderr.write(f"dynalloc train: {error}\n")
            raise SystemExit(EXIT_STOPPED) from None
        if isinstance(error, SharedError):
            fail(error)
        self.watch.disarm_host()
        abort(self.comm, self.rank, error, log)
        return False

"""One training per run directory: an exclusive lock that the process writing the directory
holds for the whole run (rank 0 of `dynalloc train`, `dynalloc baseline`).

Two trainings on one directory would resume from each other's checkpoints and overwrite each
other's logs and results; it happens when a `snakemake` killed outright leaves its training
running and a rerun starts another. The second one is refused at once, before it touches
anything, with the holder's host and pid.

Why flock(2) on a file inside the directory: the kernel releases it when its holder dies, however
it dies, so no stale lock is ever left to clean up (a lock *file* made with O_EXCL outlives a
SIGKILL). On NFS, Linux clients emulate flock with POSIX byte-range locks that the server
arbitrates between hosts (NFSv4, or NLM for v3), and a dead client's lock goes when its lease
expires (90 s by default). A filesystem that offers no locks at all (some Lustre or GPFS mounts)
gets a warning and an unlocked run, rather than no run. The lock file is never deleted: removing
it while another process opens it would give the two processes locks on two different files.
"""

import errno
import fcntl
import os
import socket
from pathlib import Path

from dynalloc.errors import DynallocError

LOCK = ".lock"  # in the run directory: holds "HOST PID" of the holder
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class RunLock:
    """The exclusive lock on run directory `out`, as a context manager. `acquire` returns a
    note to log when the filesystem cannot lock (kept in `note`), else None."""

    def __init__(self, out):
        self.out = Path(out)
        self.path = self.out / LOCK
        self.fd = self.note = None

    def __enter__(self):
        self.note = self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

    def acquire(self):
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as error:
            raise DynallocError(
                f"cannot create run directory {self.out}: {error.strerror}"
            ) from None
        try:
            note = self._lock(fd)
        except DynallocError:
            os.close(fd)
            raise
        if note:
            os.close(fd)
            return note
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{socket.gethostname()} {os.getpid()}\n".encode(), 0)
        self.fd = fd
        return None

    def check(self):
        """Refuse at once, before the slow set-up, when another process holds the lock; creates
        nothing (a bad config must leave no directory behind). A shared lock, so that the ranks
        of one run, checking at the same moment, never refuse each other (an exclusive one
        did, about once in a hundred tries)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # no lock file, so no holder; acquire() reports what else is wrong
        try:
            self._lock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)  # and with it the lock, if this took it

    def _lock(self, fd, kind=fcntl.LOCK_EX):
        """Lock `fd` (`kind`: exclusive or shared); DynallocError naming the holder when
        another process holds it, a note when the filesystem has no locks, else None."""
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").split()
            who = f"host {holder[0]}, pid {holder[1]}" if len(holder) == 2 else "holder unknown"
            raise DynallocError(
                f"{self.out} is in use by another training ({who}); wait for it to end or stop "
                "it (SIGTERM checkpoints it), then run again"
            ) from None
        except OSError as error:
            if error.errno not in NO_LOCKS:
                raise DynallocError(f"cannot lock {self.path}: {error.strerror}") from None
            return (
                f"cannot lock {self.path} ({error.strerror}): this filesystem has no locks, so a "
                "second training on this directory would not be refused"
            )
        return None

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

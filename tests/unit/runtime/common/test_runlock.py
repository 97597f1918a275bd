"""The run directory's lock, between real processes: the second is refused at once naming the
holder, touches nothing, and a holder killed outright leaves no stale lock."""

import fcntl
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
from dynalloc.errors import DynallocError
from dynalloc.runtime.common.runlock import LOCK, RunLock

HOLD = textwrap.dedent(
    """
    import sys, time
    from dynalloc.runtime.common.runlock import RunLock
    with RunLock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def holder(tmp_path):
    """A process holding the lock on tmp_path / "run"."""
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "locked\n"
    yield out, process
    process.kill()
    process.wait()


def snapshot(folder):
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.iterdir()}


def test_a_second_holder_is_refused_naming_the_first_and_touching_nothing(holder):
    out, process = holder
    (out / "iterations.csv.partial").write_text("iteration,rank\n")
    before = snapshot(out)
    for attempt in (RunLock(out).acquire, RunLock(out).check):
        with pytest.raises(DynallocError) as caught:
            attempt()
        message = str(caught.value)
        assert f"(host {socket.gethostname()}, pid {process.pid})" in message, message
        assert str(out) in message and "\n" not in message
    assert snapshot(out) == before


def test_a_holder_killed_outright_leaves_no_stale_lock(holder):
    out, process = holder
    process.send_signal(signal.SIGKILL)
    process.wait()
    RunLock(out).check()
    with RunLock(out) as lock:
        assert (out / LOCK).read_text() == f"{socket.gethostname()} {os.getpid()}\n"
        assert lock.fd is not None
    RunLock(out).check()  # released on leaving


def test_checking_creates_nothing(tmp_path):
    RunLock(tmp_path / "absent").check()
    assert not (tmp_path / "absent").exists()


def test_a_directory_that_cannot_be_made_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DynallocError, match="cannot create run directory .*file/run"):
        RunLock(tmp_path / "file" / "run").acquire()


def test_the_ranks_of_one_run_checking_at_once_do_not_refuse_each_other(tmp_path):
    """Every rank checks at start-up, at about the same moment: a check holding the lock while
    another rank checks must not look like a second training (mpiexec then left the one rank
    that passed waiting forever)."""
    out = tmp_path / "run"
    with RunLock(out):  # leaves the lock file behind, unlocked
        pass
    fd = os.open(out / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another rank's check, caught midway
        RunLock(out).check()
    finally:
        os.close(fd)

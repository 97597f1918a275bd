"""Stop requests and the peer watch, on real signals and real processes."""

import os
import signal
import subprocess
import sys
import textwrap

from dynalloc.runtime.common.faults import StopRequest
from dynalloc.runtime.common.peerwatch import alive
from helpers import wait_for


def test_a_signal_only_records_the_request_and_a_second_one_has_its_default_effect():
    """At a time limit SLURM signals every rank and srun forwards the signal again: two at once
    are one request. A second one later (Ctrl-C twice) ends the process."""
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        from dynalloc.runtime.common.faults import SAME_REQUEST_S, StopRequest
        with StopRequest() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            print(stop.requested, stop.signal_name, flush=True)
            time.sleep(SAME_REQUEST_S + 0.1)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        """
    )
    done = run_python(script)
    assert done.stdout == "True SIGTERM\n"
    assert done.returncode == -signal.SIGTERM, done.stderr


def test_another_thread_learns_of_a_signal_while_the_main_thread_waits_in_mpi():
    """Python runs a handler only when the main thread is back in the interpreter; a rank in a
    collective is not, and the stall watch must know of the signal all the same."""
    script = textwrap.dedent(
        """
        import os, signal, threading, time
        import numpy as np
        from mpi4py import MPI
        from dynalloc.runtime.common.faults import StopRequest
        seen = []
        with StopRequest() as stop:
            def other():
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGTERM)
                while stop.arrived() is None:
                    time.sleep(0.01)
                seen.append(stop.when)  # the handler has not run yet
                MPI.COMM_SELF.Send(np.zeros(1), dest=0)
            threading.Thread(target=other).start()
            MPI.COMM_SELF.Recv(np.zeros(1), source=0)  # blocked in MPI, as in a collective
            print(seen, stop.requested, stop.arrived() <= stop.when, flush=True)
        """
    )
    done = run_python(script)
    assert done.stdout == "[None] True True\n", done.stderr


def test_the_handlers_are_restored_on_leaving():
    previous = signal.getsignal(signal.SIGTERM)
    with StopRequest():
        assert signal.getsignal(signal.SIGTERM) != previous
    assert signal.getsignal(signal.SIGTERM) == previous


def test_peer_watch_names_the_lost_rank_and_ends_its_own():
    script = textwrap.dedent(
        """
        import os, signal, subprocess, time
        from dynalloc.runtime.common.faults import identity
        from dynalloc.runtime.common.peerwatch import PeerWatch
        peer = subprocess.Popen(["sleep", "60"])
        host, me = identity()
        with PeerWatch(1, [(host, peer.pid), (host, me), ("elsewhere", 1)]):
            time.sleep(0.3)
            os.kill(peer.pid, signal.SIGKILL)
            time.sleep(30)
        """
    )
    done = run_python(script)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "rank 0 (pid" in done.stderr and "was lost" in done.stderr, done.stderr


def test_the_line_survives_a_launcher_that_kills_the_rank_at_once():
    """Hydra SIGKILLs a survivor's process group as soon as a rank dies of a signal; the watch
    lives in a session of its own and still writes the line."""
    script = textwrap.dedent(
        """
        import os, signal, subprocess, sys, time
        from dynalloc.runtime.common.faults import identity
        from dynalloc.runtime.common.peerwatch import PeerWatch
        peer = subprocess.Popen(["sleep", "60"])
        host, me = identity()
        with PeerWatch(1, [(host, peer.pid), (host, me)]) as watch:
            print(watch.pid, flush=True)
            sys.stdin.readline()
            os.kill(peer.pid, signal.SIGKILL)
            os.killpg(os.getpgid(0), signal.SIGKILL)  # what hydra does to the survivors
        """
    )
    job = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    watch_pid = int(job.stdout.readline())
    job.stdin.write("\n")
    job.stdin.flush()
    _, stderr = job.communicate(timeout=20)
    assert job.returncode == -signal.SIGKILL
    assert "rank 0 (pid" in stderr and "was lost" in stderr, stderr
    wait_for(lambda: not alive(watch_pid), timeout=10, what="the watch to end with its rank")


def test_disarmed_peer_watch_lets_peers_exit():
    script = textwrap.dedent(
        """
        import subprocess, time
        from dynalloc.runtime.common.faults import identity
        from dynalloc.runtime.common.peerwatch import PeerWatch
        peer = subprocess.Popen(["sleep", "0.5"])
        host, me = identity()
        with PeerWatch(1, [(host, peer.pid), (host, me)]) as watch:
            watch.disarm()
            peer.wait()
            time.sleep(1.5)
        """
    )
    done = run_python(script)
    assert done.returncode == 0 and "lost" not in done.stderr, done.stderr


def test_a_watch_ends_quietly_with_its_rank_and_disarm_host_stops_the_peers_watches():
    script = textwrap.dedent(
        """
        import os, subprocess, sys
        from dynalloc.runtime.common.faults import identity
        from dynalloc.runtime.common.peerwatch import PeerWatch
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        peer = subprocess.Popen(["sleep", "60"], **quiet)
        peer_watch = subprocess.Popen(["sleep", "60"], **quiet)  # stands for the peer's watch
        host, me = identity()
        watch = PeerWatch(1, [(host, peer.pid), (host, me)]).__enter__()
        watch.meet([peer_watch.pid, watch.pid])
        print(watch.pid, peer.pid, peer_watch.pid, flush=True)
        sys.stdin.readline()
        if sys.argv[1] == "host":
            watch.disarm_host()
            print(peer_watch.wait(), flush=True)
        os._exit(0)  # the rank ends without disarming its own watch
        """
    )
    for how in ("exit", "host"):
        job = subprocess.Popen(
            [sys.executable, "-c", script, how],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        watch_pid, *others = map(int, job.stdout.readline().split())
        job.stdin.write("\n")
        job.stdin.flush()
        stdout, stderr = job.communicate(timeout=20)
        for pid in others:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        assert job.returncode == 0 and "lost" not in stderr, stderr
        wait_for(lambda pid=watch_pid: not alive(pid), timeout=10, what="the watch to end")
        if how == "host":
            assert int(stdout) == -signal.SIGKILL, "disarm_host left the peer's watch running"


def run_python(script):
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=20
    )

"""Stop requests and the peer watch, on real signals and real processes."""

import os
import signal
import subprocess
import sys
import textwrap

from dynalloc.faults import EXIT_LOST, StopRequest


def test_a_signal_only_records_the_request_and_a_second_one_has_its_default_effect():
    previous = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signal_name == "SIGTERM"
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) == previous


def test_peer_watch_exits_naming_the_lost_rank():
    script = textwrap.dedent(
        """
        import os, signal, subprocess, time
        from dynalloc.faults import PeerWatch, identity
        peer = subprocess.Popen(["sleep", "60"])
        host, me = identity()
        with PeerWatch(1, [(host, peer.pid), (host, me), ("elsewhere", 1)]):
            time.sleep(0.3)
            os.kill(peer.pid, signal.SIGKILL)
            time.sleep(30)
        """
    )
    done = run_python(script)
    assert done.returncode == EXIT_LOST, done.stderr
    assert "rank 0 (pid" in done.stderr and "was lost" in done.stderr


def test_disarmed_peer_watch_lets_peers_exit():
    script = textwrap.dedent(
        """
        import subprocess, time
        from dynalloc.faults import PeerWatch, identity
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


def run_python(script):
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=20
    )

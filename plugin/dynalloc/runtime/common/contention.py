"""Real CPU contention: busy processes pinned to a rank's core, started and stopped on schedule.

This is the realistic straggler: a co-located job taking part of a core, unlike the sleep
emulation which leaves the core idle.
"""

import signal
import subprocess
import sys

BURN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


class Burners:
    """Keeps exactly `n` CPU burners running on `core`; `stop()` (or exit) ends them."""

    def __init__(self, core):
        self.core = core
        self.processes = []

    def set(self, n):
        while len(self.processes) < n:
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", BURN, str(self.core)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        while len(self.processes) > n:
            self._end(self.processes.pop())

    def stop(self):
        self.set(0)

    @staticmethod
    def _end(process):
        process.send_signal(signal.SIGKILL)
        process.wait()


def burners_for(scenario, core):
    """The rank's Burners when its scenario schedules contention (and it has a core), else None."""
    if core is None or not any(c.mode == "contention" for c in scenario.changes):
        return None
    return Burners(core)

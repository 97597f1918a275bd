"""`dynalloc` with one rank made to raise mid-run: rank FAIL_RANK raises at iteration FAIL_AT.

The failure is a real exception in a real rank process; only its cause is injected."""

import os
import sys

from dynalloc import cli
from dynalloc.runtime.loop import TrainingLoop

FAIL_RANK, FAIL_AT = int(os.environ["FAIL_RANK"]), int(os.environ["FAIL_AT"])
iterate = TrainingLoop.iterate


def failing_iterate(self, step):
    if self.rank == FAIL_RANK and step.iteration == FAIL_AT:
        raise RuntimeError(f"injected failure at iteration {step.iteration}")
    return iterate(self, step)


TrainingLoop.iterate = failing_iterate
sys.exit(cli.main())

"""`dynalloc` with one rank made to raise mid-run: rank FAIL_RANK raises at iteration FAIL_AT.

The failure is a real exception in a real rank process; only its cause is injected."""

import os
import sys

from dynalloc import cli
from dynalloc.runtime.mxnet.gluon import Step

FAIL_RANK, FAIL_AT = int(os.environ["FAIL_RANK"]), int(os.environ["FAIL_AT"])
finish = Step.finish


def failing_finish(self, loss):
    if self.owner.rank == FAIL_RANK and self.iteration == FAIL_AT:
        raise RuntimeError(f"injected failure at iteration {self.iteration}")
    return finish(self, loss)


Step.finish = failing_finish
sys.exit(cli.main())

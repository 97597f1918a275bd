"""The compute timer of every DynamicBatch and of `dynalloc baseline`, so that all measure
`compute_s` the same way."""

import time


class ComputeTimer:
    """Times the enclosed forward and backward once the framework has really finished them
    (`wait`: MXNet's and CUDA's calls only enqueue work), then stretches the time by an
    emulated slowdown `factor`: the process sleeps `(factor - 1)` times what it measured.
    `seconds` holds the result."""

    def __init__(self, factor=1.0, wait=None, began=None):
        self.factor, self.wait, self.began = factor, wait, began
        self.seconds = float("nan")

    def __enter__(self):
        self.began = time.perf_counter()
        return self

    def __exit__(self, kind, error, trace):
        if kind is None:
            self.stop()

    def stop(self):
        """End the time begun at `began` (or on entering)."""
        if self.wait is not None:
            self.wait()
        measured = time.perf_counter() - self.began
        if self.factor > 1.0:
            time.sleep((self.factor - 1.0) * measured)
        self.seconds = time.perf_counter() - self.began


class StepTimer(ComputeTimer):
    """`step.compute()`: the compute timer that gives the `with` statement the step, and the
    step its time (`compute_s`). A class rather than a generator-based context manager: 5 us
    less an iteration with the caches a backward pass leaves (timed in a 1 ms Gluon loop, the
    two alternated iteration by iteration)."""

    def __init__(self, step):
        super().__init__(step.slowdown, step.owner.wait_for_device)
        self.step = step

    def __enter__(self):
        super().__enter__()
        return self.step

    def __exit__(self, kind, error, trace):
        if kind is None:
            self.stop()
            self.step.compute_s = self.seconds

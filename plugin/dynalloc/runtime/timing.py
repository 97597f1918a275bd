"""The compute timer shared by `dynalloc train` and `dynalloc baseline`, so that both measure
`compute_s` the same way."""

import time

import mxnet as mx


class ComputeTimer:
    """Times the enclosed forward and backward once MXNet's engine has really finished them
    (its calls only enqueue work), then stretches the time by an emulated slowdown `factor`:
    the process sleeps `(factor - 1)` times what it measured. `seconds` holds the result."""

    def __init__(self, factor=1.0):
        self.factor = factor
        self.seconds = float("nan")

    def __enter__(self):
        self.began = time.perf_counter()
        return self

    def __exit__(self, kind, error, trace):
        if kind is not None:
            return
        mx.nd.waitall()
        measured = time.perf_counter() - self.began
        if self.factor > 1.0:
            time.sleep((self.factor - 1.0) * measured)
        self.seconds = time.perf_counter() - self.began

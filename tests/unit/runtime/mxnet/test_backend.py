"""The Recorder's MXNet backend: the PyTorch-only parts of `run.start` refused in one line,
before anything is built."""

import pytest

pytest.importorskip("mxnet")

from dynalloc.errors import DynallocError  # noqa: E402
from dynalloc.runtime.mxnet.backend import Backend  # noqa: E402


@pytest.mark.parametrize(
    ("scheduler", "scaler", "message"),
    [
        (object(), None, "schedule belongs to its optimizer"),
        (None, object(), "PyTorch's GradScaler"),
    ],
    ids=["scheduler", "scaler"],
)
def test_a_pytorch_only_part_of_start_is_refused(scheduler, scaler, message):
    with pytest.raises(DynallocError, match=message):
        Backend().dynamic_batch(None, None, scheduler, 8, 4, scaler=scaler)

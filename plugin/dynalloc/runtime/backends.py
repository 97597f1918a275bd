"""The backend of a run config's framework: what a recorded run does the MXNet way
(`runtime.mxnet_backend`) or the PyTorch way (`runtime.torch.backend`). Each imports its
framework, so a run loads only its own."""

from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import check_framework, load_config
from dynalloc.runtime.faults import fail


def backend_of(config_path):
    """The backend of the run config's `framework` (its own module imports the framework).
    A framework named wrongly ends every rank alike, before any collective: one line from
    rank 0, exit code 2."""
    try:
        raw = load_config(config_path)
        framework = raw.get("framework", "mxnet")
        check_framework(framework)
    except DynallocError as error:
        fail(error)
    if framework == "torch":
        from dynalloc.runtime.torch.backend import TorchBackend

        return TorchBackend(raw.get("threads_per_rank", 1))
    from dynalloc.runtime.mxnet_backend import MXNetBackend

    return MXNetBackend()

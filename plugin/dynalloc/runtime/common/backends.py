"""The backend of a run config's framework: what a recorded run does the MXNet way
(`runtime.mxnet.backend`) or the PyTorch way (`runtime.torch.backend`).

The framework-neutral machinery names each adapter's backend module and imports it by that name
when a run asks for it, as a plugin registry does: `common` never imports an adapter's code, so
the adapters sit on top of it (no import circle) and a run loads only its own framework."""

import importlib

from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import check_framework, load_config
from dynalloc.runtime.common.faults import fail

ADAPTERS = {"mxnet": "dynalloc.runtime.mxnet.backend", "torch": "dynalloc.runtime.torch.backend"}


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
    return importlib.import_module(ADAPTERS[framework]).Backend()

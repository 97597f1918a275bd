"""`dynalloc convert-checkpoint CHECKPOINT...`: checkpoints of the first, pickled format
rewritten once as data (`common.checkpoint`), for the runs that should resume from them.

Loading a pickle runs whatever code it names, which is why resuming refuses such a file: this
command loads it because its user vouches for it, which they should do only for checkpoints
that nobody else could have written. It runs in the run's environment (the framework's own
optimizer state is converted: MXNet's updater states, PyTorch's state dicts).
"""

import hashlib
import importlib
import pickle
from pathlib import Path

from dynalloc.core.state import export
from dynalloc.errors import DynallocError
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.backends import ADAPTERS


def add_arguments(parser):
    parser.add_argument("checkpoints", nargs="+", type=Path, metavar="CHECKPOINT",
                        help="checkpoint files of the pickled format, which you trust")  # fmt: skip


def run(args):
    for path in args.checkpoints:
        print(f"{path}: {convert(path)}")


def convert(path):
    """Rewrite the checkpoint `path` as data, in place; what was done."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DynallocError(f"cannot read checkpoint {path}: {error.strerror}") from None
    header, digest, body = data[:22], data[22:87], data[87:]
    if header == checkpoint.MAGIC:
        return "already of the data format"
    if header != checkpoint.PICKLED:
        raise DynallocError(f"{path} is not a dynalloc checkpoint")
    if hashlib.sha256(body).hexdigest().encode() + b"\n" != digest:
        raise DynallocError(f"checkpoint {path} is truncated or corrupted (sha256 differs)")
    payload = pickle.loads(body)  # noqa: S301 - the user vouches for it: the command's purpose
    framework = payload["config"].get("framework", "mxnet")
    adapter = importlib.import_module(ADAPTERS[framework])
    payload["trainer"] = adapter.convert_optimizer_state(payload["trainer"])
    payload["policy"] = export(payload["policy"])
    try:
        checkpoint.write_file(path, payload)
    except OSError as error:
        raise DynallocError(f"cannot write checkpoint {path}: {error.strerror}") from None
    return "converted to the data format"

"""Checkpoint files of a run directory: an atomic, self-verifying format and the resume rules.

A checkpoint is one file, `checkpoints/iteration-NNNNNNNN.ckpt`: a header line, the sha256 of
the payload, and the payload (a pickle of plain Python and numpy values that the training loop
assembles). The hash makes a truncated or corrupted file detectable before unpickling, so the
resume falls back to the previous checkpoint instead of training from garbage. Files are written
under a temporary name, fsynced and renamed; the last `keep` are kept.

This module knows nothing of MPI or MXNet: rank 0 calls it with what the ranks gathered.
"""

import hashlib
import pickle
from pathlib import Path

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

MAGIC = b"DYNALLOC-CHECKPOINT 1\n"
DIRECTORY = "checkpoints"
# Keys that define the maths of the run (and its learning-rate schedule, which depends on its
# length): a checkpoint of another value cannot be continued. Policy, number of ranks, shares
# bounds, scenario and bookkeeping keys may change on resume.
IDENTITY_KEYS = (
    "dataset", "model", "global_batch", "seed", "optimizer", "drop_last", "epochs", "iterations",
)  # fmt: skip


def checkpoint_path(out, iteration):
    return Path(out) / DIRECTORY / f"iteration-{iteration:08d}.ckpt"


def existing(out):
    """Checkpoint files of the run directory `out`, newest first."""
    folder = Path(out) / DIRECTORY
    if not folder.is_dir():
        return []
    return sorted(folder.glob("iteration-*.ckpt"), reverse=True)


def write(out, iteration, payload, keep):
    """Write the checkpoint of `iteration` atomically, then remove all but the newest `keep`.

    On any failure (disk full, read-only directory) the previous checkpoints are untouched and
    DynallocError names the file."""
    path = checkpoint_path(out, iteration)
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as handle:
            handle.write(MAGIC)
            handle.write(hashlib.sha256(body).hexdigest().encode() + b"\n")
            handle.write(body)
    except OSError as error:
        previous = existing(out)
        kept = f"; kept {previous[0].name}" if previous else ""
        raise DynallocError(f"cannot write checkpoint {path}: {error.strerror}{kept}") from None
    for old in existing(out)[keep:]:
        old.unlink(missing_ok=True)
    return path


def read(path):
    """The payload of checkpoint `path`; DynallocError says why it cannot be used."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DynallocError(f"cannot read checkpoint {path}: {error.strerror}") from None
    header, digest_line = data[: len(MAGIC)], data[len(MAGIC) : len(MAGIC) + 65]
    body = data[len(MAGIC) + 65 :]
    if header != MAGIC:
        raise DynallocError(f"checkpoint {path} is not a dynalloc checkpoint")
    if hashlib.sha256(body).hexdigest().encode() + b"\n" != digest_line:
        raise DynallocError(f"checkpoint {path} is truncated or corrupted (sha256 differs)")
    return pickle.loads(body)


def newest_valid(out, warn):
    """(path, payload) of the newest readable checkpoint of `out`, or None when there is none.

    An unreadable newer one is reported through `warn(message)` and skipped; if every one is
    unreadable the run cannot continue from them, and that is an error rather than a silent
    fresh start."""
    found = existing(out)
    for path in found:
        try:
            return path, read(path)
        except DynallocError as error:
            warn(f"{error}; trying the previous one")
    if found:
        raise DynallocError(
            f"no usable checkpoint in {Path(out) / DIRECTORY} ({len(found)} corrupted); "
            "delete that directory to start the run afresh"
        )
    return None


def check_resumable(path, saved, config):
    """DynallocError unless a run of `config` may continue from the checkpoint of a run of
    `saved` (both resolved configs)."""
    for key in IDENTITY_KEYS:
        if saved.get(key) != config.get(key):
            raise DynallocError(
                f"checkpoint {path} belongs to a run with {key} {saved.get(key)!r}, this config "
                f"has {config.get(key)!r}: only policy, ranks, shares bounds and scenario may "
                f"change on resume; use another --out, or delete {Path(path).parent} to start "
                "afresh"
            )


def layout(state):
    """The attribute names of `state` and of the objects it holds (the first object of a list).
    A policy pickled by another version of dynalloc unpickles without complaint and fails later
    on an attribute this version added; comparing layouts tells such a state in advance."""
    if isinstance(state, list | tuple):
        return tuple(layout(item) for item in state[:1] if hasattr(item, "__dict__"))
    if hasattr(state, "__dict__"):
        attributes = sorted((name, layout(value)) for name, value in vars(state).items())
        return type(state).__qualname__, tuple(attributes)
    return None


def remove_all(out):
    for path in existing(out):
        path.unlink(missing_ok=True)

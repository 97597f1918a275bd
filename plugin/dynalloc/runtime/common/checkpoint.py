"""Checkpoint files of a run directory: an atomic, self-verifying format of data only, and the
resume rules.

A checkpoint is one file, `checkpoints/iteration-NNNNNNNN.ckpt`: a header line, the sha256 of
the payload, and the payload: an `.npz` archive (numpy's, read with `allow_pickle=False`) of the
payload's arrays and of one JSON document holding everything else, the arrays in it by number.
The payload is what the training loop assembles, plain values and arrays only
(`core.state.export`); nothing in a checkpoint names code to run, so a run directory on a shared
filesystem gives whoever can write it no way into the next job that resumes from it. The hash
makes a truncated or corrupted file detectable, so the resume falls back to the previous
checkpoint instead of training from garbage. Files are written under a temporary name, fsynced
and renamed; the last `keep` are kept.

The first format (`DYNALLOC-CHECKPOINT 1`) was a pickle, which can run any code when loaded:
such a file is refused, naming the command that converts a checkpoint the user trusts
(`dynalloc convert-checkpoint`, `runtime.common.convert`).

This module knows nothing of MPI or a framework: rank 0 calls it with what the ranks gathered.
"""

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from dynalloc.core.state import export, plain
from dynalloc.errors import DynallocError
from dynalloc.experiment.script_spec import SCRIPT_BUILDS
from dynalloc.fsutil import atomic_write

MAGIC = b"DYNALLOC-CHECKPOINT 2\n"
PICKLED = b"DYNALLOC-CHECKPOINT 1\n"
DIRECTORY = "checkpoints"
ARRAY = "__array__"
# Keys that define the maths of the run (and its learning-rate schedule, which depends on its
# length): a checkpoint of another value cannot be continued. Policy, number of ranks, shares
# bounds, scenario and bookkeeping keys may change on resume.
IDENTITY_KEYS = (
    "dataset", "model", "global_batch", "seed", "optimizer", "drop_last", "epochs", "iterations",
)  # fmt: skip


class PickledCheckpoint(DynallocError):
    """A checkpoint of the first, pickled format: refused, never loaded."""


def checkpoint_path(out, iteration):
    return Path(out) / DIRECTORY / f"iteration-{iteration:08d}.ckpt"


def existing(out):
    """Checkpoint files of the run directory `out`, newest first."""
    folder = Path(out) / DIRECTORY
    if not folder.is_dir():
        return []
    return sorted(folder.glob("iteration-*.ckpt"), reverse=True)


def encode(payload):
    """The bytes of `payload`: an .npz of its arrays and its JSON document."""
    arrays = []

    def lift(tree):  # the arrays out of the tree, each replaced by its number
        if isinstance(tree, np.ndarray):
            arrays.append(tree)
            return {ARRAY: len(arrays) - 1}
        if isinstance(tree, dict):
            return {key: lift(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [lift(item) for item in tree]
        return tree

    document = json.dumps(lift(export(payload)), allow_nan=True).encode()
    members = {f"a{i}": array for i, array in enumerate(arrays)}
    buffer = io.BytesIO()
    np.savez(buffer, document=np.frombuffer(document, dtype=np.uint8), **members)
    return buffer.getvalue()


def decode(body):
    """The payload of `encode`'s bytes, read as data: no object arrays, no pickle."""
    with np.load(io.BytesIO(body), allow_pickle=False) as archive:
        document = json.loads(archive["document"].tobytes())
        arrays = {name: archive[name] for name in archive.files if name != "document"}

    def place(tree):
        if isinstance(tree, dict) and set(tree) == {ARRAY}:
            return arrays[f"a{tree[ARRAY]}"]
        if isinstance(tree, dict):
            return {key: place(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [place(item) for item in tree]
        return tree

    return plain(place(document))


def write(out, iteration, payload, keep):
    """Write the checkpoint of `iteration` atomically, then remove all but the newest `keep`.

    On any failure (disk full, read-only directory) the previous checkpoints are untouched and
    DynallocError names the file."""
    path = checkpoint_path(out, iteration)
    try:
        write_file(path, payload)
    except OSError as error:
        previous = existing(out)
        kept = f"; kept {previous[0].name}" if previous else ""
        raise DynallocError(f"cannot write checkpoint {path}: {error.strerror}{kept}") from None
    for old in existing(out)[keep:]:
        old.unlink(missing_ok=True)
    return path


def write_file(path, payload):
    """The checkpoint file `path` of `payload`, written atomically (OSError on failure)."""
    body = encode(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as handle:
        handle.write(MAGIC)
        handle.write(hashlib.sha256(body).hexdigest().encode() + b"\n")
        handle.write(body)


def read(path):
    """The payload of checkpoint `path`; DynallocError says why it cannot be used."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise DynallocError(f"cannot read checkpoint {path}: {error.strerror}") from None
    header, digest_line = data[: len(MAGIC)], data[len(MAGIC) : len(MAGIC) + 65]
    body = data[len(MAGIC) + 65 :]
    if header == PICKLED:
        raise PickledCheckpoint(
            f"checkpoint {path} is of the first, pickled format, which runs code when it is "
            f"loaded: if you trust it, convert it once with `dynalloc convert-checkpoint {path}` "
            f"(in the run's environment), or delete {Path(path).parent} to start afresh"
        )
    if header != MAGIC:
        raise DynallocError(f"checkpoint {path} is not a dynalloc checkpoint")
    if hashlib.sha256(body).hexdigest().encode() + b"\n" != digest_line:
        raise DynallocError(f"checkpoint {path} is truncated or corrupted (sha256 differs)")
    try:
        return decode(body)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile, json.JSONDecodeError) as error:
        raise DynallocError(f"checkpoint {path} holds no plain data ({error})") from None


def newest_valid(out, warn):
    """(path, payload) of the newest readable checkpoint of `out`, or None when there is none.

    An unreadable newer one is reported through `warn(message)` and skipped; if every one is
    unreadable the run cannot continue from them, and that is an error rather than a silent
    fresh start."""
    found = existing(out)
    for path in found:
        try:
            return path, read(path)
        except PickledCheckpoint:
            raise  # an older one is no safer, and the user must choose
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
        if config.get("script") and key in SCRIPT_BUILDS and config.get(key) is None:
            continue  # the script builds its own (an older checkpoint names the defaults)
        if saved.get(key) != config.get(key):
            raise DynallocError(
                f"checkpoint {path} belongs to a run with {key} {saved.get(key)!r}, this config "
                f"has {config.get(key)!r}: only policy, ranks, shares bounds and scenario may "
                f"change on resume; use another --out, or delete {Path(path).parent} to start "
                "afresh"
            )


def remove_all(out):
    for path in existing(out):
        path.unlink(missing_ok=True)

"""The run directory: the one contract between the ranks that write a run and the analysis that
reads it (DESIGN.md, Contracts).

Both environments import this module (the training one with numpy 1.23 and MXNet, the workflow
one with pandas), so it needs nothing but numpy and PyYAML: the file names, the per-iteration and
per-epoch rows as named tuples (built and read by field name), metrics.json written and read, and
the one computation of the wait fraction that metrics.json and the summaries both report.
"""

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

CONFIG = "config.yaml"
ITERATIONS = "iterations.csv"
EPOCHS = "epochs.csv"
METRICS = "metrics.json"
PARAMETERS = "model.params"
LOG = "train.log"
PARTIAL = ".partial"  # files grow under NAME.partial and are renamed when the run ends
# What a finished run leaves beside its config: an earlier run's must not pass for a new one's.
RUN_FILES = (METRICS, ITERATIONS, EPOCHS, PARAMETERS, LOG)


class Row(NamedTuple):
    """One rank's iteration, a line of iterations.csv."""

    iteration: int
    epoch: int
    rank: int
    batch_size: int
    compute_s: float  # forward + backward of this rank's share, after the engine finished
    sync_s: float  # inside the gradient exchange (it holds the wait for the slowest)
    wait_s: float  # the iteration's slowest compute_s minus this rank's
    iteration_s: float
    loss: float
    slowdown: float  # the emulated slowdown, contention included
    policy: str
    data_s: float = 0.0  # waiting for this rank's samples (decoded, as NDArrays); balanced too
    read_s: float = 0.0  # the samples' reading, hidden behind the compute by a read-ahead or not
    ranks: int = 0  # the iteration's ranks: fewer after an elastic run lost some (0: not known)


class EpochRow(NamedTuple):
    """One epoch, a line of epochs.csv."""

    epoch: int
    wall_s: float
    train_loss: float
    test_loss: float
    test_accuracy: float


ROW_FIELDS = Row._fields
EPOCH_FIELDS = EpochRow._fields
METRICS_KEYS = (  # what a reader may rely on in metrics.json
    "policy",
    "ranks",
    "model",
    "global_batch",
    "iterations",
    "wall_s",
    "samples_per_s",
    "final_test_accuracy",
    "time_to_target_s",
)
_RANK, _COMPUTE, _WAIT, _DATA = (
    ROW_FIELDS.index(name) for name in ("rank", "compute_s", "wait_s", "data_s")
)


def partial(path):
    """The name `path` grows under until the run ends."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL)


def prepare(out, config, resuming=False):
    """Create the run directory `out` with this run's config.yaml and without the result files
    of an earlier run. `resuming` keeps the log growing (a finished run's log is renamed back to
    its partial name, since the resumed run appends to it); otherwise the old log goes too."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if resuming and (out / LOG).exists():
            os.replace(out / LOG, partial(out / LOG))
        for stale in RUN_FILES:
            (out / stale).unlink(missing_ok=True)
        if not resuming:
            partial(out / LOG).unlink(missing_ok=True)
        with atomic_write(out / CONFIG) as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None


def write_json(path, data):
    """`data` as indented JSON, atomically; DynallocError names a file that cannot be written."""
    try:
        with atomic_write(path) as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
    except OSError as error:
        raise DynallocError(f"cannot write {path}: {error.strerror}") from None


def read_json(path, keys):
    """The JSON object in `path`, which must hold `keys`."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise DynallocError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise DynallocError(f"{path} is not valid JSON") from None
    if not isinstance(data, dict):
        raise DynallocError(f"{path} must hold a JSON object")
    missing = [key for key in keys if key not in data]
    if missing:
        raise DynallocError(f"{path} lacks key(s): {', '.join(missing)}")
    return data


def wait_fractions(rows, ranks):
    """Per rank: its summed wait_s over its summed compute_s + data_s + wait_s, the share of its
    busy time spent waiting for the slowest; 0 for a rank without rows or time. `rows` are Rows
    or any sequences in their field order (numbers read back as strings too; rows of runs made
    before data_s existed lack it)."""
    table = np.array(
        [(r[_RANK], r[_COMPUTE], r[_WAIT], r[_DATA] if len(r) > _DATA else 0) for r in rows],
        dtype=float,
    )
    table = table.reshape(-1, 4)
    fractions = []
    for rank in range(ranks):
        mine = table[table[:, 0] == rank]
        busy = mine[:, 1].sum() + mine[:, 2].sum() + mine[:, 3].sum()
        fractions.append(float(mine[:, 2].sum() / busy) if busy > 0 else 0.0)
    return fractions

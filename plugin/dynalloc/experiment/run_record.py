"""What a run recorded, read back for a fit: its resolved config and `iterations.csv` as numpy
arrays, checked against each other. `dynalloc simulate --fit` and a warm start from a run
directory read it, in either environment (numpy and PyYAML only), and a directory they cannot
use is refused with one DynallocError naming the file and what is wrong: a config whose ranks,
scenario or share bounds do not match the rows, a missing column or rank, a time that is no
number, a slowdown that is not positive."""

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynalloc import rundir
from dynalloc.core.costfit import first_computations, fit_costs, fit_noise
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config

COLUMNS = ("iteration", "epoch", "rank", "batch_size", "compute_s", "sync_s", "iteration_s",
           "slowdown")  # fmt: skip
WHOLE = ("iteration", "epoch", "rank", "batch_size")
OPTIONAL = ("data_s", "read_s", "ranks")  # columns a run of an earlier version lacks


@dataclass(frozen=True)
class RunRecord:
    """A run's config and its rows, one per rank per iteration, in the order of the run, each
    column an array (`data_s` and `read_s` 0 where the run predates them)."""

    path: Path
    config: dict
    ranks: int
    iteration: np.ndarray
    epoch: np.ndarray
    rank: np.ndarray
    batch_size: np.ndarray
    compute_s: np.ndarray
    sync_s: np.ndarray
    iteration_s: np.ndarray
    slowdown: np.ndarray
    data_s: np.ndarray
    read_s: np.ndarray

    @property
    def busy(self):
        """What the policies balance: the compute and the wait for the share's samples, or
        their reading where a read-ahead hid a longer one (`Step.timings`)."""
        return np.maximum(self.compute_s + self.data_s, self.read_s)

    def after_warm_up(self):
        """Boolean mask of the rows after the first iteration (the framework's warm-up)."""
        return self.iteration > self.iteration.min()

    def costs(self):
        """(a, c, new_shape, noise): each rank's own affine cost of its share (the emulated
        slowdown divided out), as `core.costfit` fits it, and the noise between the ranks."""
        new = first_computations(self.rank, self.batch_size)
        kept = self.after_warm_up()
        if not kept.any():
            raise DynallocError(f"{self.path}: no iteration after the warm-up to fit")
        own = self.busy / self.slowdown
        rows = self.iteration[kept], self.rank[kept], self.batch_size[kept], own[kept], new[kept]
        try:
            a, c, new_shape = fit_costs(*rows[1:], self.ranks)
        except ValueError as error:
            raise DynallocError(f"{self.path}: {error}") from None
        return a, c, new_shape, fit_noise(*rows, a, c)


def read_record(run_dir):
    """The RunRecord of `run_dir`, or DynallocError naming what makes it unusable. Of a run
    that went on with fewer ranks after a loss (`elastic`), the rows since, which its config
    (the survivors') describes."""
    run_dir = Path(run_dir)
    config = load_config(run_dir / rundir.CONFIG)
    path = run_dir / rundir.ITERATIONS
    columns = _read_columns(path)
    columns = last_launch(columns)
    ranks = int(columns["rank"].max()) + 1
    _check_rows(path, columns, ranks)
    _check_config(run_dir / rundir.CONFIG, config, ranks)
    return RunRecord(run_dir, config, ranks, **columns)


def last_launch(columns):
    """The columns' rows since their `ranks` column last changed: the launch that went on with
    the ranks that remained after a loss (`elastic`), which the run's config describes. (Rows
    come in the run's order; a file without the column is one launch's.)"""
    ranks = columns.pop("ranks", None)
    if ranks is None:
        return columns
    changed = np.flatnonzero(ranks[1:] != ranks[:-1])
    start = changed[-1] + 1 if len(changed) else 0
    return {name: values[start:] for name, values in columns.items()}


def _read_columns(path):
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            fields = reader.fieldnames or []
            rows = list(reader)
    except OSError as error:
        raise DynallocError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, csv.Error):
        raise DynallocError(f"{path} is not a readable CSV file") from None
    missing = [name for name in COLUMNS if name not in fields]
    if missing:
        raise DynallocError(f"{path} lacks column(s): {', '.join(missing)}")
    if not rows:
        raise DynallocError(f"{path} has no rows")
    wanted = [*COLUMNS, *(name for name in OPTIONAL if name in fields)]
    columns = {}
    for name in wanted:
        try:
            values = np.array([float(row[name]) for row in rows])
        except (TypeError, ValueError):
            raise DynallocError(f"{path}: column {name} must hold numbers") from None
        if not np.isfinite(values).all():
            raise DynallocError(f"{path}: column {name} holds a value that is not finite")
        if name in (*WHOLE, "ranks"):
            if (values < 0).any() or (values != np.round(values)).any():
                raise DynallocError(f"{path}: column {name} must hold whole numbers >= 0")
            values = values.astype(np.int64)
        columns[name] = values
    for name in ("data_s", "read_s"):
        columns.setdefault(name, np.zeros(len(rows)))
    return columns


def _check_rows(path, columns, ranks):
    if (columns["slowdown"] <= 0).any():
        raise DynallocError(f"{path}: column slowdown must be > 0 (an emulated slowdown factor)")
    for name in ("compute_s", "sync_s", "iteration_s", "data_s", "read_s"):
        if (columns[name] < 0).any():
            raise DynallocError(f"{path}: column {name} must hold seconds >= 0")
    iteration, rank = columns["iteration"], columns["rank"]
    pairs, counts = np.unique(np.stack([iteration, rank]), axis=1, return_counts=True)
    if (counts > 1).any():
        it, r = pairs[:, np.argmax(counts > 1)]
        raise DynallocError(f"{path}: rank {r} has two rows of iteration {it}")
    per_iteration = np.bincount(np.unique(iteration, return_inverse=True)[1])
    if (per_iteration != ranks).any():
        short = np.unique(iteration)[np.argmax(per_iteration != ranks)]
        present = sorted(rank[iteration == short].tolist())
        absent = sorted(set(range(ranks)) - set(present))
        raise DynallocError(
            f"{path}: iteration {short} has rows of rank(s) {present} but not of "
            f"{absent} ({ranks} ranks in the file): a rank's rows are missing"
        )


def _check_config(path, config, ranks):
    """The config's ranks, per-rank scenario and share bounds must be the rows' ranks."""
    stated = config.get("ranks")
    if stated is not None and stated != ranks:
        raise DynallocError(
            f"{path}: ranks is {stated}, but iterations.csv has {ranks} ranks' rows"
        )
    scenario = config.get("scenario") or {}
    for key in ("slowdown", "read_slowdown"):
        factors = scenario.get(key)
        if isinstance(factors, list) and len(factors) != ranks:
            raise DynallocError(
                f"{path}: scenario.{key} has {len(factors)} factors for the {ranks} ranks of "
                "iterations.csv"
            )
        if isinstance(factors, list) and not all(_positive(f) for f in factors):
            raise DynallocError(f"{path}: scenario.{key} must hold factors > 0, got {factors}")
    for key in ("min_share", "max_share"):
        bound = config.get(key)
        if isinstance(bound, list) and len(bound) != ranks:
            raise DynallocError(
                f"{path}: {key} has {len(bound)} entries for the {ranks} ranks of iterations.csv"
            )


def _positive(value):
    return isinstance(value, int | float) and math.isfinite(value) and value > 0

"""A training run's directory read back: its config, metrics and logs, checked on the way in.

Pure pandas and numpy over the files of a run directory (`dynalloc.rundir`), so the workflow
environment, which cannot import MXNet, reads runs made anywhere. Every unreadable input is one
DynallocError naming the file.
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dynalloc import rundir
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config

ITERATION_COLUMNS = ("iteration", "epoch", "rank", "batch_size", "compute_s", "wait_s")
EPOCH_COLUMNS = ("epoch", "wall_s", "train_loss", "test_accuracy")


@dataclass(frozen=True)
class Run:
    """The files of one run directory, read and checked."""

    name: str
    labels: dict
    config: dict
    metrics: dict
    iterations: pd.DataFrame
    epochs: pd.DataFrame

    @property
    def policy(self):
        return self.metrics["policy"]

    @property
    def scenario(self):
        return self.labels.get("scenario", "")


def load_run(run_dir):
    run_dir = Path(run_dir)
    config = load_config(run_dir / rundir.CONFIG)
    labels = {key: str(value) for key, value in (config.get("labels") or {}).items()}
    return Run(
        name=labels.get("run", run_dir.name),
        labels=labels,
        config=config,
        metrics=rundir.read_json(run_dir / rundir.METRICS, rundir.METRICS_KEYS),
        iterations=_with_data_s(read_csv(run_dir / rundir.ITERATIONS, ITERATION_COLUMNS)),
        epochs=read_csv(run_dir / rundir.EPOCHS, EPOCH_COLUMNS),
    )


def _with_data_s(iterations):
    """Runs made before the data_s column waited for no data that they measured: 0."""
    if "data_s" not in iterations:
        iterations = iterations.assign(data_s=0.0)
    return iterations


def read_csv(path, columns=()):
    """The table in the CSV file `path`, which must have rows and hold `columns` as numbers;
    DynallocError names the file and what is wrong with it."""
    try:
        table = pd.read_csv(path)
    except OSError as error:
        raise DynallocError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise DynallocError(f"{path} is not a readable CSV file") from None
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise DynallocError(f"{path} lacks column(s): {', '.join(missing)}")
    if table.empty:
        raise DynallocError(f"{path} has no rows")
    not_numbers = [c for c in columns if not pd.api.types.is_numeric_dtype(table[c])]
    if not_numbers:
        raise DynallocError(f"{path}: column(s) {', '.join(not_numbers)} must hold numbers")
    return table

"""Run-directory output of rank 0: per-iteration and per-epoch CSVs, metrics, progress on stderr.

Logs grow under a `.partial` name while the run goes and are renamed when it ends, so a reader
(Snakemake, the analysis) never takes a crashed run's file for a finished one.
"""

import contextlib
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

ROW_FIELDS = (
    "iteration",
    "epoch",
    "rank",
    "batch_size",
    "compute_s",
    "sync_s",
    "wait_s",
    "iteration_s",
    "loss",
    "slowdown",
    "policy",
)
EPOCH_FIELDS = ("epoch", "wall_s", "train_loss", "test_loss", "test_accuracy")


class GrowingCSV:
    """A CSV appended to under `NAME.partial` and renamed to NAME by `close()`."""

    def __init__(self, path, fields):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        with self.writing():
            self.handle = open(self.partial, "w", newline="", encoding="utf-8")  # noqa: SIM115
            self.writer = csv.writer(self.handle)
            self.writer.writerow(fields)

    def write(self, rows):
        with self.writing():
            self.writer.writerows(rows)
            self.handle.flush()

    def close(self):
        with self.writing():
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.replace(self.partial, self.path)

    @contextlib.contextmanager
    def writing(self):
        """A full disk or a read-only directory, reported as the file that could not grow."""
        try:
            yield
        except OSError as error:
            raise DynallocError(f"cannot write {self.partial}: {error.strerror}") from None


def write_json(path, data):
    try:
        with atomic_write(path) as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
    except OSError as error:
        raise DynallocError(f"cannot write {path}: {error.strerror}") from None


def wait_fractions(rows, ranks):
    """Per rank: sum of wait_s over sum of compute_s + wait_s (rows as in ROW_FIELDS)."""
    table = np.array([(r[2], r[4], r[6]) for r in rows], dtype=float).reshape(-1, 3)
    fractions = []
    for rank in range(ranks):
        mine = table[table[:, 0] == rank]
        busy = mine[:, 1].sum() + mine[:, 2].sum()
        fractions.append(float(mine[:, 2].sum() / busy) if busy > 0 else 0.0)
    return fractions


class Progress:
    """One status line on stderr: rewritten in place on a terminal, every ~5% otherwise."""

    def __init__(self, total_iterations, epochs, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.epochs = total_iterations, epochs
        self.tty = self.stream.isatty()
        self.every = max(1, total_iterations // 20)
        self.started = time.perf_counter()
        self.samples = 0

    def update(self, iteration, epoch, samples, shares, loss):
        self.samples += samples
        done = iteration + 1
        if not self.tty and done % self.every and done != self.total:
            return
        rate = self.samples / max(time.perf_counter() - self.started, 1e-9)
        line = (
            f"epoch {epoch + 1}/{self.epochs} iter {done}/{self.total} | "
            f"{rate:,.0f} samples/s | shares {' '.join(str(int(s)) for s in shares)} | "
            f"loss {loss:.4f}"
        )
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

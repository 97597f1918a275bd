"""Rank 0's output while a run goes: CSV logs that grow, and the progress line on stderr.

Logs grow under a `.partial` name while the run goes and are renamed when it ends, so a reader
(Snakemake, the analysis) never takes a crashed run's file for a finished one.
"""

import contextlib
import csv
import os
import sys
import time
from pathlib import Path

from dynalloc.errors import DynallocError
from dynalloc.rundir import partial


class GrowingCSV:
    """A CSV appended to under `NAME.partial` and renamed to NAME by `close()`."""

    def __init__(self, path, fields):
        self.path = Path(path)
        self.partial = partial(self.path)
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

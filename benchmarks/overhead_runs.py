"""What `overhead_torch.py` and `overhead_gluon.py` share: their arguments, the timing of a loop
after its warm-up, and their runs interleaved over the sizes and scenarios (the order reversed
on odd repeats, so that the machine's drift meets each alike), rank 0 writing samples/s of each
(medians over repeats, and each repeat's, for ratios paired within a repeat).
Standard library only: each runs in its own framework's environment."""

import argparse
import json
import statistics
import time
from pathlib import Path

SCENARIOS = {"1:1": 1.0, "1:3": 3.0}  # rank 1's slowdown
WARM_UP = 20  # untimed iterations a run, in which adaptive's shares settle
# dynalloc with `static` (equal shares, as the baseline's) at 1:1 alone: the integration's own
# cost per iteration (the step's bookkeeping, the exchange of the ranks' times), apart from
# the policy's (its update, its moves of the shares under the machine's noise).
STATIC = "dynalloc static"


def arguments(doc):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="about, per run")
    return parser.parse_args()


def timed(loop, iterations, warm_up):
    """Seconds of `iterations` of `loop` (an object with `block(iterations)`), after `warm_up`
    untimed ones (in which the shares settle)."""
    loop.block(warm_up)
    began = time.perf_counter()
    loop.block(iterations)
    return time.perf_counter() - began


def interleave(runs, sizes, rank, ranks, args):
    """Each of `runs` (name: function(size, factor, rank, ranks, iterations, warm_up) ->
    seconds) on each of `sizes` (name: (..., global batch)) and scenario (`STATIC` at 1:1
    only), `args.repeats` times."""
    rates = {}
    for repeat in range(args.repeats):
        for size in sizes:
            iterations = max(50, int(args.seconds / (float(size.split()[0]) * 1e-3)))
            for scenario, slowdown in SCENARIOS.items():
                factor = slowdown if rank == 1 else 1.0
                for name in runs if repeat % 2 == 0 else list(runs)[::-1]:
                    if name == STATIC and slowdown != 1.0:
                        continue
                    seconds = runs[name](size, factor, rank, ranks, iterations, WARM_UP)
                    rate = iterations * sizes[size][3] / seconds
                    rates.setdefault(f"{size} {scenario} {name}", []).append(rate)
                    if rank == 0:
                        print(f"{size:6s} {scenario} {name:14s} repeat {repeat}: {rate:9.0f} "
                              "samples/s", flush=True)  # fmt: skip
    if rank == 0:
        medians = {key: statistics.median(values) for key, values in rates.items()}
        figures = {"repeats": args.repeats, "samples_per_s": medians, "runs": rates}
        args.out.write_text(json.dumps(figures) + "\n")

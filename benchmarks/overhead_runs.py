"""What `overhead_torch.py` and `overhead_gluon.py` share: their arguments, and their loops run
round by round on each size (`ladder_rounds.climb`: a block of each loop right after one of the
baseline at 1:1, every loop on its own model kept from round to round, the order reversed on
odd rounds), rank 0 writing each round's ratios and each loop's samples/s. Whole runs, timed
one after the other, differ here by 5-10% at any size, the same code included: the ratio of two
blocks run a fraction of a second apart cancels that drift, and its median over the rounds is
the figure. Standard library and numpy only: each runs in its own framework's environment."""

import argparse
import json
import statistics
from pathlib import Path

from ladder_rounds import climb, positive

BASELINE = "baseline"  # the framework's: plain DDP, or the bare Allreduce loop
SCENARIOS = {"1:1": 1.0, "1:3": 3.0}  # rank 1's slowdown
WARM_UP = 20  # untimed iterations of every loop before the rounds, in which the shares settle
# dynalloc with `static` (equal shares, as the baseline's) at 1:1 alone: the integration's own
# cost per iteration (the step's bookkeeping, the exchange of the ranks' times), apart from
# the policy's (its update, its moves of the shares under the machine's noise).
STATIC = "dynalloc static"
LOOPS = (("1:3", BASELINE), ("1:1", "dynalloc"), ("1:1", STATIC), ("1:3", "dynalloc"))


def arguments(doc):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=positive, default=40)
    parser.add_argument("--block-seconds", type=float, default=0.2,
                        help="about, a block of each loop")  # fmt: skip
    return parser.parse_args()


def iterations_in(size, seconds):
    """About `seconds` of iterations of the model named `size` ("1 ms", "10 ms", ...), at least
    2."""
    return max(2, round(seconds / (float(size.split()[0]) * 1e-3)))


def endless(dyn):
    """A DynamicBatch's steps, epoch after epoch: a loop run a block at a time."""
    epoch = 0
    while True:
        yield from dyn.epoch(epoch)
        epoch += 1


def measure(baseline, dynamic, sizes, rank, ranks, args):
    """On each of `sizes` (name: (..., global batch)), the baseline at 1:1 against each of
    `LOOPS`, round by round. `baseline(size, rank, ranks, samples, factor)` and `dynamic(...,
    factor, policy)` build the framework's loops (with `block(iterations)`), rank 1 slowed by
    `factor`. Rank 0 writes the rounds' ratios (samples/s of the loop over the baseline's at
    1:1, block by block) and each loop's samples/s (from its median block) to `args.out`."""

    def make(size, scenario, name, samples):
        factor = SCENARIOS[scenario] if rank == 1 else 1.0
        if name == BASELINE:
            return baseline(size, rank, ranks, samples, factor)
        policy = "static" if name == STATIC else "adaptive"
        return dynamic(size, rank, ranks, samples, factor, policy)

    ratios, rates, blocks = {}, {}, {}
    for size, shape in sizes.items():
        block = iterations_in(size, args.block_seconds)
        samples = shape[-1] * (WARM_UP + block * (args.rounds + 1) + 1)
        base = make(size, "1:1", BASELINE, samples)
        loops = {f"{scenario} {name}": make(size, scenario, name, samples)
                 for scenario, name in LOOPS}  # fmt: skip
        for loop in [base, *loops.values()]:
            loop.block(WARM_UP)
        against, extra, _, base_s, _ = climb(base, loops, args.rounds, block)
        iteration = statistics.median(base_s)
        rates[f"{size} 1:1 {BASELINE}"] = shape[-1] / iteration
        for key in loops:
            ratios[f"{size} {key}"] = against[key]
            rates[f"{size} {key}"] = shape[-1] / (iteration + statistics.median(extra[key]))
        blocks[size] = block
        if rank == 0:
            print(f"{size}: " + ", ".join(f"{key} {statistics.median(against[key]):.3f}"
                                          for key in loops), flush=True)  # fmt: skip
    if rank == 0:
        figures = {"rounds": args.rounds, "block": blocks, "ratios": ratios, "samples_per_s": rates}
        args.out.write_text(json.dumps(figures) + "\n")

"""What `cost_ladder.py` (PyTorch) and `gluon_ladder.py` (Gluon) share: every round runs a block
of iterations of each variant right after one of the baseline, each loop on its own model kept
from round to round, the order reversed on odd rounds; a variant's figure is the median over
rounds of the baseline's block time over its own (1.00: no cost), with the quartiles of those
ratios, its extra time an iteration and its page faults. No framework imported: each ladder
runs in its own framework's environment."""

import argparse
import resource
import statistics
import time

import numpy as np


def page_faults():
    """This process's minor page faults so far: memory the allocator had handed back to the
    kernel, and got again zero-filled (glibc's malloc trims freed memory at the top of its heap
    and unmaps large blocks)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def positive(text):
    """An argument that counts something: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1, got {text!r}")
    return int(text)


def climb(base, ladder, rounds, block):
    """Run `base` and every loop of `ladder` (name: loop with `block(iterations)`) for `rounds`
    rounds of `block` iterations after one untimed block each; returns (ratios, extra seconds
    an iteration, page faults an iteration) per name, and the baseline's iteration seconds and
    page faults an iteration."""
    ratios, extra = {name: [] for name in ladder}, {name: [] for name in ladder}
    faults = dict.fromkeys([None, *ladder], 0)  # None: the baseline's
    base_s = []
    for loop in [base, *ladder.values()]:
        loop.block(block)  # warm-up, untimed
    for round_ in range(rounds):
        names = list(ladder) if round_ % 2 == 0 else list(ladder)[::-1]
        for name in names:
            variant, seconds = ladder[name], {}
            for loop in (base, variant) if round_ % 2 == 0 else (variant, base):
                paged, began = page_faults(), time.perf_counter()  # the count outside the time
                loop.block(block)
                seconds[loop] = time.perf_counter() - began
                faults[name if loop is variant else None] += page_faults() - paged
            ratios[name].append(seconds[base] / seconds[variant])
            extra[name].append((seconds[variant] - seconds[base]) / block)
            base_s.append(seconds[base] / block)
    per_iteration = {name: faults[name] / (rounds * block) for name in ladder}
    return ratios, extra, per_iteration, base_s, faults[None] / len(base_s) / block


def report(heading, base_name, ratios, extra, faults):
    """Rank 0's lines: the heading, then one line a variant."""
    print(f"{heading}. {base_name}'s time over the variant's, median [quartiles] over rounds; "
          "the variant's extra time an iteration, median; its page faults an iteration on "
          "rank 0")  # fmt: skip
    for name, values in ratios.items():
        low, high = np.percentile(values, [25, 75])
        print(f"{name:22s} {statistics.median(values):.3f} [{low:.3f}, {high:.3f}] "
              f"{statistics.median(extra[name]) * 1e6:+6.0f} us "
              f"{faults[name]:6.0f}")  # fmt: skip

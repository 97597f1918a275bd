"""The shares every policy chooses on a fixed set of simulated runs, as one sha256 per run.

`policy_traces.json` holds the digests (their first 16 hex digits, in the order of `cases`)
recorded with the policies as they were before they worked on arrays (commit 8a5200a: one cost
model object per rank, a heap for the last units), and recorded again when `adaptive` came to
judge a jump against the slowdown the ranks shared at the last iteration (127 of the 1,155 runs
changed; the total time of 40 simulated runs with a drifting machine and a rank that changes
speed stayed within 1.5%, 0.9998x on average), and again when `adaptive` came to forget a jump
that goes back the next iteration, a spike, and to make later jumps prove themselves (325 of the
1,155 runs changed; over the 405 `adaptive` runs of up to 64 ranks the total time, the slowest
rank's of each iteration, moved by 0.9993x on average with the default parameters, 1.0009x over
all five variants, 0.945x to 1.052x run by run), and again when iterations shorter than
`pool_s` (20 ms) came to be pooled into one update (26 of the 1,155 runs changed, those whose
slowest rank computes under 20 ms: total time 0.976x to 1.022x run by run, 1.0009x on average
over the 13 `adaptive` runs among them), and again when a pool after one that left the shares
as they were came to be twice as long (`STEADY_POOLS`; 11 of the 1,155 runs changed: total time
0.996x to 1.020x run by run, 1.002x on average, 1.0008x over the 7 `adaptive` runs among them;
`--times` with either checkout on PYTHONPATH, compared run by run).
`test_policy_traces.py` checks that today's policies choose the very same shares, to the last
sample, on every update of every run. Record again (only when a policy's behaviour is meant to
change, and say so in the commit) with the checkout whose policies are the reference:

    PYTHONPATH=<checkout>/plugin .venv-train/bin/python tests/unit/core/policy_traces.py --write

Each run feeds a policy affine per-rank times of its own shares, with noise, a rank that turns
three times slower and one that turns twice as fast, speed bursts, epochs' smaller last batches
(ranks without samples among them) and now and then an unusable time; its seed is its position
in `cases`, so the inputs follow from the shares alone.
"""

import hashlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from dynalloc.core.policies import make_policy

RECORDED = Path(__file__).with_name("policy_traces.json")

ADAPTIVE_VARIANTS = [
    {},
    {"confirm": 1},
    {"confirm": 3, "change_threshold": 0.0},
    {"forgetting": 0.8, "dead_band": 0.0, "min_move": 0.0},
    {"significance": 1, "jump": 1.5, "settle": 0, "noise_multiplier": 1.0, "drift_slack": 0.5},
]


def cases():
    """(name, policy spec, ranks, global batch, min_share, max_share, noise, iterations)."""
    found = []
    for ranks, iterations in [(1, 30), (2, 80), (3, 80), (4, 80), (7, 60), (16, 60),
                              (64, 40), (512, 20), (4096, 8)]:  # fmt: skip
        batch = 32 * ranks + ranks // 2
        bounds = [(1, None), (0, None), (2, 48)]
        if ranks > 1:  # per-rank bounds: rank 0 capped, rank 1 raised
            bounds.append(([0, 8] + [1] * (ranks - 2), [40] + [None] * (ranks - 1)))
        for low, high in bounds:
            for noise in (0.0, 0.05, 0.3):
                specs = [{"name": name} for name in ("static", "proportional", "dbs")]
                specs += [{"name": "controller"}, {"name": "controller", "dead_band": 0.0}]
                specs += [{"name": "oracle", "speeds": [1.0 + (r % 3) for r in range(ranks)]}]
                specs += [{"name": "adaptive", **variant} for variant in ADAPTIVE_VARIANTS]
                for spec in specs:
                    name = f"{spec} r{ranks} B{batch} [{low}, {high}] noise {noise}"
                    found.append((name, spec, ranks, batch, low, high, noise, iterations))
    return found


def trace(index, spec, ranks, batch, low, high, noise, iterations):
    """The shares of every iteration of one run, as a (iterations + 1, ranks) array, and the
    run's total time (each iteration's slowest rank, without the noise, summed)."""
    rng = np.random.default_rng(index)
    policy = make_policy(dict(spec), ranks, batch, low, high)
    intercepts = rng.uniform(0.002, 0.02, ranks)
    slopes = rng.uniform(1e-4, 1e-3, ranks) * rng.choice([1, 1, 2, 4], ranks)
    shares, epoch, seen, elapsed = policy.shares.copy(), 0, [policy.shares.copy()], 0.0
    for iteration in range(1, iterations + 1):
        factor = np.ones(ranks)
        factor[0] = 3.0 if iteration > iterations // 3 else 1.0
        factor[ranks // 2] *= 0.5 if iteration > 2 * iterations // 3 else 1.0
        if rng.random() < 0.05:
            factor *= rng.uniform(1, 3, ranks)
        seconds = factor * (intercepts + slopes * shares) * rng.uniform(1 - noise, 1 + noise, ranks)
        if rng.random() < 0.02:
            seconds[rng.integers(ranks)] = np.nan
        used = shares
        if rng.random() < 0.08:  # an epoch's last, smaller batch
            used = np.floor(shares * rng.uniform(0, 1)).astype(np.int64)
            used[rng.integers(ranks)] += 1
            epoch += 1
        elapsed += float((factor * (intercepts + slopes * used)).max())
        shares = policy.update(used, seconds, iteration, epoch)
        seen.append(shares)
    return np.array(seen, dtype=np.int64), elapsed


def digest(shares):
    return hashlib.sha256(np.ascontiguousarray(shares, dtype="<i8").tobytes()).hexdigest()[:16]


def traces():
    """Each run's name, shares and total time, in the order of `cases`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the unusable times, warned once
        return [(case[0], *trace(i, *case[1:])) for i, case in enumerate(cases())]


def digests():
    """Each run's name and the digest of its shares, in the order of `cases`."""
    return [(name, digest(shares)) for name, shares, _ in traces()]


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        RECORDED.write_text(json.dumps([value for _, value in digests()], indent=0) + "\n")
        print(f"{RECORDED}: {len(cases())} runs")
    elif sys.argv[1:] == ["--times"]:  # to compare two checkouts' policies run by run
        print(json.dumps({name: elapsed for name, _, elapsed in traces()}, indent=0))
    else:
        sys.exit("usage: policy_traces.py --write | --times")

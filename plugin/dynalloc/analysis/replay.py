"""`dynalloc replay`: which policy would have been fastest on the machine a run met.

Every policy is driven through the seconds per sample each rank measured in the run's
`iterations.csv` (`replay_run`), so they all meet the same machine, second by second:
try a policy or its parameters on a cluster's own logs before spending its time.
"""

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dynalloc.analysis.runs import load_run
from dynalloc.core.policies import REPLAYABLE, make_policy
from dynalloc.core.scenario import Scenario
from dynalloc.core.simulate import replay
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write


def add_arguments(parser):
    parser.add_argument(
        "--run-dir", nargs="+", required=True, type=Path, metavar="DIR",
        help="runs made by dynalloc train (any policy)",
    )  # fmt: skip
    add_policy_arguments(parser, "replay")
    parser.add_argument(
        "--new-shape", type=float, default=0.0, metavar="FRACTION",
        help="what a share new to a rank costs, as a fraction of its time, once (default 0; "
        "LeNet on a CPU: 0.04-0.11, benchmarks/new_shape.py)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="also write the rows here (CSV)")


def add_policy_arguments(parser, verb):
    """--policies and --param, which `parse_params` reads (replay and simulate take both)."""
    parser.add_argument(
        "--policies", nargs="+", default=list(REPLAYABLE), metavar="NAME",
        help=f"the policies to {verb} (default: {' '.join(REPLAYABLE)})",
    )  # fmt: skip
    parser.add_argument(
        "--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
        help="a policy parameter, e.g. adaptive.dead_band=0.03 (repeatable)",
    )  # fmt: skip


def parse_params(items, policies):
    """{policy: {key: value}} from POLICY.KEY=VALUE items (values read as YAML scalars)."""
    params = {}
    for item in items:
        name, equals, value = item.partition("=")
        policy, dot, key = name.partition(".")
        if not (equals and dot and policy and key):
            raise DynallocError(f"--param {item!r}: expected POLICY.KEY=VALUE")
        if policy not in policies:
            raise DynallocError(f"--param {item!r}: {policy!r} is not among --policies")
        try:
            params.setdefault(policy, {})[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise DynallocError(f"--param {item!r}: {value!r} is no YAML value") from None
    return params


def run(args):
    if not (math.isfinite(args.new_shape) and args.new_shape >= 0):
        raise DynallocError(f"--new-shape must be a fraction >= 0, got {args.new_shape}")
    params = parse_params(args.param, args.policies)
    rows = []
    for path in args.run_dir:  # fastest first within each run, the runs in the order given
        mine = sorted(replay_run(path, args.policies, params, [args.new_shape]), key=replayed)
        rows += [{**row, "vs_fastest": replayed(row) / replayed(mine[0])} for row in mine]
    table = pd.DataFrame(rows)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(args.out, newline="") as handle:
            table.to_csv(handle, index=False)
    print(table.to_string(index=False, float_format="%.3f"))


def replayed(row):
    return row["replayed_s"]


def measured_speeds(iterations):
    """Each rank's seconds per sample in each full iteration after the first (MXNet's warm-up),
    iterations x ranks: the machine a run met, for `simulate.replay` to drive other policies on.
    An epoch's last, smaller batch is left out: a rank may have no sample in it."""
    return full_iterations(iterations)[0]


def full_iterations(iterations):
    """(seconds per sample, epoch, iteration number) of the full iterations after the first:
    iterations x ranks, then one of each per iteration."""
    by_rank = iterations.pivot(index="iteration", columns="rank")
    batch = by_rank["batch_size"].sum(axis=1)
    kept = by_rank[batch == batch.max()].iloc[1:]
    busy = kept["compute_s"] + (kept["data_s"] if "data_s" in iterations else 0.0)
    if "read_s" in iterations:  # what the policies balance (`Step.timings`)
        busy = np.maximum(busy, kept["read_s"])
    speeds = (busy / kept["batch_size"]).to_numpy()
    return speeds, kept["epoch"].max(axis=1).to_numpy(), kept.index.to_numpy()


def replay_run(run_dir, policies=REPLAYABLE, params=None, new_shapes=(0.0,), jitter_draw=0):
    """Each of `policies` driven through the seconds per sample that the run in `run_dir`
    measured (`simulate.replay`, under the run's global batch and share bounds; `params` maps a
    policy to its parameters), once per new-shape cost: one row per (policy, new_shape) with the
    replayed compute time (each iteration's slowest rank, summed) and how many times it changed
    the split. Which policy would have been fastest on the machine this run met, without
    training again; with `jitter_draw` > 0, on that machine under another draw of the run's
    emulated jitter (`redraw_jitter`)."""
    run = load_run(run_dir)
    speeds, epochs, numbers = full_iterations(run.iterations)
    if not len(speeds):
        raise DynallocError(f"{run_dir}: no full iteration after the warm-up to replay")
    config, rows = run.config, []
    if jitter_draw:
        speeds = redraw_jitter(speeds, numbers, config.get("scenario") or {}, jitter_draw)
    for name, new_shape in itertools.product(policies, new_shapes):
        try:
            policy = make_policy(
                {"name": name, **(params or {}).get(name, {})},
                speeds.shape[1],
                int(run.metrics["global_batch"]),
                config.get("min_share", 1),
                config.get("max_share"),
            )
        except ValueError as error:
            raise DynallocError(str(error)) from None
        trace = replay(policy, speeds, new_shape, epochs)
        rows.append(
            {
                "run": run.name,
                "policy": name,
                "new_shape": new_shape,
                "iterations": len(speeds),
                "replayed_s": float(trace.times.max(axis=1).sum()),
                "split_changes": int(np.any(np.diff(trace.shares, axis=0), axis=1).sum()),
            }
        )
    return rows


def redraw_jitter(speeds, iterations, scenario, draw):
    """`speeds` (seconds per sample, iterations x ranks, at the run's `iterations`) measured
    under the emulated `scenario`, as they would have been under its jitter's `draw`: divided by
    the factors the ranks slept by, times the other draw's. Every run of a jittered scenario
    meets one draw (it depends on rank and iteration only); other draws tell a policy's merit
    from that draw's luck."""
    ranks = speeds.shape[1]
    try:
        own = Scenario(ranks, **scenario)
        other = Scenario(ranks, **{**scenario, "jitter_draw": draw})
    except (TypeError, ValueError) as error:
        raise DynallocError(f"cannot redraw the jitter of scenario {scenario!r}: {error}") from None

    def factors(emulated):
        return np.array([[emulated.factor(r, int(i)) for r in range(ranks)] for i in iterations])

    return speeds * factors(other) / factors(own)

"""`dynalloc replay`: which policy would have been fastest on the machine a run met.

Every policy is driven through the seconds per sample each rank measured in the run's
`iterations.csv` (`analysis.replay_run`), so they all meet the same machine, second by second:
try a policy or its parameters on a cluster's own logs before spending its time.
"""

import math
from pathlib import Path

import yaml

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write
from dynalloc.policies import REPLAYABLE


def add_arguments(parser):
    parser.add_argument(
        "--run-dir", nargs="+", required=True, type=Path, metavar="DIR",
        help="runs made by dynalloc train (any policy)",
    )  # fmt: skip
    parser.add_argument(
        "--policies", nargs="+", default=list(REPLAYABLE), metavar="NAME",
        help=f"the policies to replay (default: {' '.join(REPLAYABLE)})",
    )  # fmt: skip
    parser.add_argument(
        "--param", action="append", default=[], metavar="POLICY.KEY=VALUE",
        help="a policy parameter, e.g. adaptive.dead_band=0.03 (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--new-shape", type=float, default=0.0, metavar="FRACTION",
        help="what a share new to a rank costs, as a fraction of its time, once (default 0; "
        "LeNet on a CPU: 0.04-0.11, benchmarks/new_shape.py)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="also write the rows here (CSV)")


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
    import pandas as pd  # the workflow environment's, like every reader of run directories

    from dynalloc.analysis import replay_run

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

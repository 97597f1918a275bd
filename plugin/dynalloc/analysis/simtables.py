"""BENCHMARKS.md's planner section, in markdown, from `benchmarks/bench_simulate.py`'s tables:
the fitted simulator against every run of the bench, the adaptive/static speedups it predicts,
the projections beyond the bench and the simulator's speed; the verdicts computed here, the prose
around them `benchmarks/sections.md`'s."""

from pathlib import Path

import pandas as pd

from dynalloc.analysis.benchstats import ORDER, mark
from dynalloc.errors import DynallocError

TABLES = ("validation", "speedups", "projections", "speed")
PREDICTION_TOLERANCE = 0.10  # the issue's: mean iteration time and speedup within 10%
OPTIMUM_TOLERANCE = 0.03  # adaptive's steady state within 3% of the optimum


def load(folder):
    """{name: table} of the CSV files `bench_simulate.py` wrote in `folder`."""
    tables = {}
    for name in TABLES:
        path = Path(folder) / f"{name}.csv"
        if not path.is_file():
            raise DynallocError(f"{path} is missing: run make bench-simulate")
        tables[name] = pd.read_csv(path)
    return tables


def targets(facts):
    """The issue's targets for the simulator, what was measured and whether it was met."""
    f = facts
    rows = [
        ("the fit of a run predicts its mean iteration time within 10%",
         f"worst {_error(f['mean_error'])}; {f['mean_within']} of {f['runs']} runs within",
         f["mean_met"]),
        ("the fit of a run predicts the `adaptive`/`static` speedup within 10%",
         f"worst {_error(f['speedup_error'])}; {f['speedup_within']} of {f['speedup_cases']} "
         "predictions within", f["speedup_met"]),
        ("`adaptive` within 3% of the optimum in steady state, 64 to 4,096 ranks",
         f"at most {_error(f['optimum_gap'])}", f["optimum_met"]),
        ("`adaptive` ahead of every other policy, 64 to 4,096 ranks", "steady state",
         f["ahead_met"]),
        (f"every policy over {f['speed_iterations']:,} iterations of {f['speed_ranks']:,} ranks "
         "in under a minute", f"{f['speed_total']:.1f} s", f["speed_met"]),
    ]  # fmt: skip
    lines = ["| target | measured | met |", "|---|---|---|"]
    return "\n".join(lines + [f"| {t} | {m} | {ok} |" for t, m, ok in rows])


def validation(table):
    """Every run: measured and predicted mean iteration time, and the error."""
    lines = [
        "| model | scenario | ranks | policy | measured (ms) | predicted (ms) | error |",
        "|---|---|---|---|---|---|---|",
    ]
    table = table.assign(order=table["policy"].map(ORDER.index))
    for row in table.sort_values(["model", "scenario", "order"]).itertuples():
        lines.append(
            f"| {row.model} | {row.scenario} | {row.ranks} | `{row.policy}` | "
            f"{1e3 * row.measured_s:.1f} | {1e3 * row.predicted_s:.1f} | {_error(row.error)} |"
        )
    return "\n".join(lines)


def speedups(table):
    """Per scenario: adaptive over static, measured and predicted from each run's fit."""
    lines = [
        "| model | scenario | ranks | measured | from the `static` run | error "
        "| from the `adaptive` run | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.model} | {row.scenario} | {row.ranks} | {row.measured:.3f}× | "
            f"{row.from_static:.3f}× | {_error(row.from_static_error)} | "
            f"{row.from_adaptive:.3f}× | {_error(row.from_adaptive_error)} |"
        )
    return "\n".join(lines)


def projections(table):
    """Per cluster size: each policy's steady iteration time and its ratio to the optimum."""
    policies = [p for p in dict.fromkeys(table["policy"]) if p != "optimum"] + ["optimum"]
    lines = [
        "| ranks | " + " | ".join(f"`{p}`" for p in policies) + " |",
        "|---" * (len(policies) + 1) + "|",
    ]
    for ranks, rows in table.groupby("ranks"):
        rows = rows.set_index("policy")
        cells = [
            f"{1e3 * rows.loc[p, 'steady_s']:.2f} ms ({rows.loc[p, 'vs_optimum']:.3f}×)"
            for p in policies
        ]
        lines.append(f"| {ranks:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def facts(tables):
    """The numbers the section's prose cites, and its verdicts: each met or missed against its
    tolerance. A predicted speedup is set against the ratio of two runs made minutes apart,
    which carries the machine's drift (the prose says how much); the verdict does not excuse a
    miss by it, as the targets of BENCHMARKS.md excuse none."""
    validation, speedups = tables["validation"], tables["speedups"]
    errors = pd.concat([speedups["from_static_error"], speedups["from_adaptive_error"]])
    projected = tables["projections"].set_index(["ranks", "policy"])
    steady = projected["steady_s"].unstack()
    rivals = [p for p in steady.columns if p not in ("adaptive", "optimum")]
    within = (steady["adaptive"] / steady["optimum"] - 1).max()
    ahead = bool((steady["adaptive"].to_frame().values < steady[rivals].values).all())
    speed = tables["speed"].set_index("policy")
    return {
        "runs": len(validation),
        "mean_error": validation["error"].loc[validation["error"].abs().idxmax()],
        "mean_met": mark(validation["error"].abs().max() <= PREDICTION_TOLERANCE),
        "mean_within": int((validation["error"].abs() <= PREDICTION_TOLERANCE).sum()),
        "speedup_error": errors.iloc[errors.abs().to_numpy().argmax()],
        "speedup_met": mark(errors.abs().max() <= PREDICTION_TOLERANCE),
        "speedup_within": int((errors.abs() <= PREDICTION_TOLERANCE).sum()),
        "speedup_cases": len(errors),
        "optimum_gap": within,
        "optimum_met": mark(within <= OPTIMUM_TOLERANCE),
        "ahead_met": mark(ahead),
        "speed_ranks": int(speed["ranks"].iloc[0]),
        "speed_iterations": int(speed["iterations"].iloc[0]),
        "speed_total": speed["seconds"].sum(),
        "speed_engine": speed.loc["static", "seconds"],
        "speed_adaptive": speed.loc["adaptive", "seconds"],
        "speed_met": mark(speed["seconds"].sum() < 60),
    }


def _error(value):
    return f"{value:+.1%}"

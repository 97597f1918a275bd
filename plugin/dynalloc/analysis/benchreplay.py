"""A benchmark's paired replay: every policy driven through the speeds each LeNet run measured
(`replay.replay_run`), so that adaptive meets each rival on the same machine, second by second,
and its ratios to them are free of the drift between separate runs."""

import pandas as pd

from dynalloc.analysis.benchstats import lenet, train_dir
from dynalloc.analysis.replay import replay_run
from dynalloc.core.policies import REPLAYABLE

NEW_SHAPE = 0.07  # benchmarks/new_shape.py: a share LeNet has not computed costs 4-11%, once
JITTER_DRAWS = 10  # other draws of a jittered scenario's noise replayed on its runs' machines
SAME = 1e-9  # a ratio this close to 1: both policies held the same split all along


def replayed(tables, jittered=()):
    """Each LeNet run's measured speeds (of `make bench` and the repeats: `tables`, a list of
    (results directory, `benchstats.load` table), `make bench`'s first) with every policy its
    scenario's grid ran replayed on them, with and without the new-shape cost: one row per
    (scenario, run, new_shape, policy) with the replayed seconds. The runs of a `jittered`
    scenario are replayed under JITTER_DRAWS other draws of its jitter as well, as the scenario
    "<name>, other jitter"."""
    grid = tables[0][1]
    rows = []
    for results, table in tables:
        measured = table[(table["model"] == "lenet") & (table["policy"] != "dist_sync")]
        for _, run in measured.iterrows():
            scenario = run["scenario"]
            policies = [p for p in lenet(grid, scenario).index if p in REPLAYABLE]
            run_dir = train_dir(results, run["run"])
            draws = range(JITTER_DRAWS + 1) if scenario in jittered else [0]
            for draw in draws:
                for row in replay_run(run_dir, policies, {}, (0.0, NEW_SHAPE), draw):
                    rows.append(
                        {
                            "scenario": f"{scenario}, other jitter" if draw else scenario,
                            "trace": f"{results}/{run['run']}#{draw}",
                            "new_shape": row["new_shape"],
                            "policy": row["policy"],
                            "seconds": row["replayed_s"],
                        }
                    )
    return pd.DataFrame(rows)


def replay_ratios(replays):
    """adaptive against each rival on the same speeds: per (scenario, new_shape, rival) the
    median of the rival's replayed seconds over adaptive's, and on how many runs' speeds
    adaptive was the faster, and exactly as fast (both held the same split all along)."""
    wide = replays.pivot_table(
        index=["scenario", "new_shape", "trace"], columns="policy", values="seconds"
    )
    rows = []
    for (scenario, new_shape), speeds in wide.groupby(level=["scenario", "new_shape"]):
        for rival in (p for p in REPLAYABLE if p in speeds.columns and p != "adaptive"):
            ratio = (speeds[rival] / speeds["adaptive"]).dropna()
            if len(ratio):
                rows.append(
                    {
                        "scenario": scenario,
                        "new_shape": new_shape,
                        "rival": rival,
                        "median": float(ratio.median()),
                        "wins": int((ratio > 1 + SAME).sum()),
                        "ties": int((abs(ratio - 1) <= SAME).sum()),
                        "traces": len(ratio),
                    }
                )
    return pd.DataFrame(rows)

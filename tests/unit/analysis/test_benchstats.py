"""A benchmark's statistics (`benchstats`, `benchreplay`) on small tables with known numbers."""

import math

import numpy as np
import pandas as pd
import pytest
from dynalloc.analysis import benchreplay, benchstats
from dynalloc.errors import DynallocError
from helpers import make_run

FIELDS = [
    "run", "dataset", "scenario", "model", "policy", "ranks", "seed", "samples_per_s",
    "mean_wait_fraction", "final_test_accuracy", "time_to_target_s", "iterations_until_balanced",
]  # fmt: skip
DEFAULTS = (0, "lenet", 0.86, 0.1)  # seed, model, final accuracy, mean wait


def results(path, rows, speedups=()):
    """A results directory whose summary.csv holds `rows`: (scenario, policy, samples/s) with
    optional seed, model, final accuracy and mean wait."""
    path.mkdir(parents=True)
    summary = []
    for scenario, policy, sps, *more in rows:
        seed, model, accuracy, wait = (*more, *DEFAULTS[len(more) :])
        name = f"fashion-mnist-{model}-{policy}-{scenario}-r2-s{seed}"
        summary.append([name, "fashion-mnist", scenario, model, policy, 2, seed, sps, wait,
                        accuracy, 30.0, None])  # fmt: skip
    pd.DataFrame(summary, columns=FIELDS).to_csv(path / "summary.csv", index=False)
    pd.DataFrame(list(speedups), columns=["run", "speedup"]).to_csv(
        path / "speedup.csv", index=False
    )
    return path


BENCH = [
    ("homogeneous", "adaptive", 1100.0),
    ("homogeneous", "dist_sync", 900.0),
    ("homogeneous", "static", 1000.0),
    ("homogeneous", "controller", 1050.0),
    ("homogeneous", "dbs", 1030.0),
    ("hetero-1-4", "static", 500.0, 0, "lenet", 0.85),
    ("hetero-1-4", "adaptive", 800.0, 0, "lenet", 0.87),
    ("hetero-1-4", "static", 50.0, 0, "resnet", 0.80),
    ("hetero-1-4", "adaptive", 80.0, 0, "resnet", 0.81),
]
REPEATS = [  # seeds 1 and 2 of adaptive and static, homogeneous
    ("homogeneous", "adaptive", 990.0, 1, "lenet", 0.855),
    ("homogeneous", "static", 1000.0, 1, "lenet", 0.861),
    ("homogeneous", "adaptive", 1210.0, 2, "lenet", 0.858),
    ("homogeneous", "static", 1100.0, 2, "lenet", 0.859),
]


@pytest.fixture
def bench(tmp_path):
    speedups = [("fashion-mnist-lenet-adaptive-hetero-1-4-r2-s0", 1.6)]
    table = benchstats.load(results(tmp_path / "bench", BENCH, speedups))
    runs = benchstats.races(table, benchstats.load(results(tmp_path / "repeats", REPEATS)))
    return table, runs


def test_load_joins_the_speedups_and_orders_the_policies_as_the_report_shows_them(bench):
    table, _ = bench
    lenet = table[table["model"] == "lenet"]
    assert list(zip(lenet["scenario"], lenet["policy"], strict=True)) == [
        ("hetero-1-4", "static"),
        ("hetero-1-4", "adaptive"),
        ("homogeneous", "static"),
        ("homogeneous", "dbs"),
        ("homogeneous", "controller"),
        ("homogeneous", "adaptive"),
        ("homogeneous", "dist_sync"),
    ]
    speedups = table.set_index(["model", "scenario", "policy"])["speedup"]
    assert speedups["lenet", "hetero-1-4", "adaptive"] == 1.6
    assert math.isnan(speedups["lenet", "homogeneous", "static"])


def test_load_names_the_missing_table(tmp_path):
    path = results(tmp_path / "bench", BENCH)
    (path / "speedup.csv").unlink()
    with pytest.raises(DynallocError) as error:
        benchstats.load(path)
    assert (
        str(error.value) == f"{path / 'speedup.csv'} is missing: run the bench that writes {path}"
    )


def test_races_are_the_repeated_pairs_with_seed_0_from_the_bench(bench):
    _, runs = bench
    assert list(zip(runs["policy"], runs["seed"], runs["samples_per_s"], strict=True)) == [
        ("static", 0, 1000.0),
        ("static", 1, 1000.0),
        ("static", 2, 1100.0),
        ("adaptive", 0, 1100.0),
        ("adaptive", 1, 990.0),
        ("adaptive", 2, 1210.0),
    ]


def test_ratios_are_paired_by_seed_where_both_policies_ran_again(bench):
    table, runs = bench
    assert benchstats.ratios(table, runs, "homogeneous", "adaptive", "static") == pytest.approx(
        [1.1, 0.99, 1.1]
    )
    # controller ran once: the one ratio of make bench, repeats or not
    assert benchstats.ratios(table, runs, "homogeneous", "adaptive", "controller") == (
        pytest.approx([1100 / 1050])
    )
    assert benchstats.ratios(table, None, "homogeneous", "adaptive", "static") == [1.1]


def test_the_ratios_of_the_repeats_include_seed_0_of_the_bench(bench):
    """A race run again in the repeats gets seed 0 from `make bench` (`races` joins it), so
    its target counts three seeds, not the repeats' two."""
    table, runs = bench
    assert sorted(runs.loc[runs["policy"] == "static", "seed"]) == [0, 1, 2]
    assert len(benchstats.ratios(table, runs, "homogeneous", "adaptive", "static")) == 3


def test_a_median_that_misses_by_1_percent_is_missed_even_when_one_seed_met_it():
    # the old rule called this *within noise*: below on the median, one seed above
    measured, met = benchstats.verdict([0.97, 0.99, 1.01], 1.0, "static")
    assert (measured, met) == ("median 0.990× `static`, 0.970-1.010 over 3 seeds", "**missed**")
    assert benchstats.verdict([1.02, 0.99], 1.0, "static")[1] == "met"  # median 1.005


@pytest.mark.parametrize("ratio", [1.185, 0.9311, 0.5])
def test_a_single_ratio_is_shown_and_not_judged(ratio):
    # the old rule met a lone 1.185 (homogeneous: the machine's drift) and excused a lone 0.931
    assert benchstats.verdict([ratio], 0.98, "static") == (
        f"{ratio:.3f}× `static`",
        "not judged: one run (make bench-repeats judges it)",
    )


def test_the_balance_is_judged_on_the_median_of_each_runs_worst_change():
    measured, met = benchstats.balance_verdict({0: 9.0, 1: 5.0, 2: 4.0}, 5)
    assert (measured, met) == (
        "median 5 iterations (each run's worst change): 9 (seed 0), 5 (seed 1), 4 (seed 2)",
        "met",
    )
    # a run that never balanced counts as the longest
    measured, met = benchstats.balance_verdict({0: 3.0, 1: np.nan, 2: 7.0}, 5)
    assert met == "**missed**" and measured.startswith("median 7 iterations")
    assert "never (seed 1)" in measured
    assert benchstats.balance_verdict({0: 3.0}, 5) == (
        "3 iterations (worst change)",
        "not judged: one run (make bench-repeats judges it)",
    )


def test_per_seed_values_come_from_the_repeats_where_they_ran_else_from_the_bench(bench):
    table, runs = bench
    column = "final_test_accuracy"
    assert benchstats.per_seed(table, runs, "homogeneous", "static", column) == {
        0: 0.86, 1: 0.861, 2: 0.859,
    }  # fmt: skip
    assert benchstats.per_seed(table, runs, "homogeneous", "dbs", column) == {0: 0.86}
    assert benchstats.per_seed(table, None, "hetero-1-4", "adaptive", column) == {0: 0.87}


def test_the_noise_band_is_the_spread_of_the_runs_that_split_equally(bench):
    table, _ = bench
    # static 1000, dbs 1030 (no oracle); controller, adaptive and dist_sync moved or are MXNet's
    assert benchstats.noise_band(table) == pytest.approx(0.03)
    assert benchstats.noise_band(table[table["scenario"] != "homogeneous"]) == 0


def test_seed_spreads_are_each_repeated_policys_range_of_accuracy(bench):
    _, runs = bench
    spreads = benchstats.seed_spreads(runs)
    assert spreads["homogeneous", "adaptive"] == pytest.approx(0.86 - 0.855)
    assert spreads["homogeneous", "static"] == pytest.approx(0.861 - 0.859)


def test_facts_hold_the_numbers_the_discussion_cites(bench):
    table, runs = bench
    values = benchstats.facts(table, runs)
    assert values["sps"]["hetero-1-4"] == {"static": 500.0, "adaptive": 800.0}
    assert values["ratio"]["hetero-1-4"] == {"static": 1.6}
    assert values["ratio"]["homogeneous"]["dist_sync"] == pytest.approx(1100 / 900)
    assert values["speedup"]["hetero-1-4"]["adaptive"] == 1.6
    assert values["resnet"] == {"static": 50.0, "adaptive": 80.0}
    assert values["spread"] == pytest.approx(0.02)  # hetero-1-4: 0.85 to 0.87 (LeNet)
    assert values["noise"] == pytest.approx(0.03)
    assert values["median"]["homogeneous"] == {"static": 1000.0, "adaptive": 1100.0}
    assert values["paired"]["homogeneous"] == {"static": pytest.approx(1.1)}
    assert values["lowest"]["homogeneous"]["static"] == pytest.approx(0.99)
    assert values["highest"]["homogeneous"]["static"] == pytest.approx(1.1)
    assert values["seed_spread"] == pytest.approx(0.005)
    assert "replay" not in values and "paired" not in benchstats.facts(table)


def replays(rows):
    """Replayed seconds: (trace, new_shape, {policy: seconds}), scenario s."""
    return pd.DataFrame(
        [
            {"scenario": "s", "trace": trace, "new_shape": shape, "policy": p, "seconds": v}
            for trace, shape, seconds in rows
            for p, v in seconds.items()
        ]
    )


def test_replay_ratios_pair_each_rival_with_adaptive_on_the_same_speeds():
    rows = benchreplay.replay_ratios(
        replays(
            [
                ("a", 0.0, {"adaptive": 10, "static": 12, "controller": 9}),
                ("b", 0.0, {"adaptive": 10, "static": 10}),  # no controller on this run
                ("a", 0.07, {"adaptive": 11, "static": 12, "controller": 9}),
            ]
        )
    ).set_index(["new_shape", "rival"])
    assert rows.loc[(0.0, "static"), ["median", "wins", "ties", "traces"]].tolist() == [
        1.1, 1, 1, 2,
    ]  # fmt: skip
    assert rows.loc[(0.0, "controller"), ["median", "wins", "traces"]].tolist() == [0.9, 0, 1]
    assert rows.loc[(0.07, "static"), "median"] == pytest.approx(12 / 11)


def test_facts_from_replays_are_those_with_the_new_shape_cost(bench):
    table, _ = bench
    ratios = benchreplay.replay_ratios(
        replays(
            [
                ("a", 0.0, {"adaptive": 10, "static": 12}),
                ("a", 0.07, {"adaptive": 11, "static": 11}),
                ("b", 0.07, {"adaptive": 10, "static": 13}),
            ]
        )
    )
    values = benchstats.facts(table, None, ratios)
    assert values["replay_free"] == {"s": {"static": pytest.approx(1.2)}}
    assert values["replay"] == {"s": {"static": pytest.approx((1 + 1.3) / 2)}}
    assert (values["wins"], values["ties"], values["traces"]) == (
        {"s": {"static": 1}},
        {"s": {"static": 1}},
        {"s": 2},
    )


def test_the_replay_drives_the_policies_of_the_scenarios_grid_on_each_lenet_run(tmp_path):
    """Two LeNet runs of ours, rank 1 twice as slow; dist_sync (MXNet's, no run directory of
    ours) and the residual CNN are not replayed, and only the grid's policies are."""
    rows = [
        ("homogeneous", "static", 1000.0),
        ("homogeneous", "adaptive", 1100.0),
        ("homogeneous", "dist_sync", 900.0),
        ("homogeneous", "static", 100.0, 0, "resnet"),
    ]
    path = results(tmp_path / "bench", rows)
    for policy in ("static", "adaptive"):
        name = f"fashion-mnist-lenet-{policy}-homogeneous-r2-s0"
        make_run(benchstats.train_dir(path, name).parent, "train", [[0.4, 0.8]] * 6, policy=policy)
    replayed = benchreplay.replayed([(path, benchstats.load(path))])
    assert sorted(replayed["policy"].unique()) == ["adaptive", "static"]
    assert sorted(replayed["new_shape"].unique()) == [0.0, benchreplay.NEW_SHAPE]
    assert replayed["trace"].nunique() == 2 and len(replayed) == 2 * 2 * 2
    free = replayed[replayed["new_shape"] == 0].groupby("policy")["seconds"].max()
    assert free["static"] == pytest.approx(5 * 0.8)  # 5 full iterations after the warm-up
    assert free["adaptive"] < 0.9 * free["static"]

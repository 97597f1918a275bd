"""BENCHMARKS.md's pieces on small tables with known numbers: the markdown tables
(`benchtables`), the bench's figures (`plots`) and the prose of benchmarks/sections.md."""

import importlib.util

import numpy as np
import pandas as pd
import pytest
from dynalloc.analysis import benchstats, benchtables, plots
from helpers import ROOT, make_run

SCRIPT = ROOT / "benchmarks" / "report.py"


def table(rows, seed=0):
    """A `benchstats.load` table of LeNet runs of one seed: (scenario, policy, samples/s,
    balance)."""
    frame = pd.DataFrame(
        rows, columns=["scenario", "policy", "samples_per_s", "iterations_until_balanced"]
    )
    frame = frame.assign(model="lenet", ranks=2, seed=seed, speedup=np.nan, mean_wait_fraction=0.1)
    frame = frame.assign(time_to_target_s=np.nan, final_test_accuracy=0.86)
    frame["order"] = frame["policy"].map({p: i for i, p in enumerate(benchstats.ORDER)})
    return frame


RUNS = table(  # make bench, seed 0
    [
        ("hetero-1-2", "static", 500.0, None),
        ("hetero-1-2", "oracle", 700.0, 2),
        ("hetero-1-2", "adaptive", 690.0, 3),
        ("homogeneous", "static", 1000.0, None),
        ("homogeneous", "dbs", 1030.0, None),
        ("homogeneous", "controller", 1010.0, 4),
        ("homogeneous", "adaptive", 1185.0, 1),  # the machine's drift: both hold equal shares
        ("homogeneous", "dist_sync", 950.0, None),
        ("time-varying", "static", 600.0, None),
        ("time-varying", "adaptive", 900.0, 7),
    ]
)
REPEATS = pd.concat(  # make bench-repeats, seeds 1 and 2 of all but dbs
    [
        table(
            [
                ("hetero-1-2", "static", 500.0, None),
                ("hetero-1-2", "oracle", 700.0, 2),
                ("hetero-1-2", "adaptive", 660.0, 3),
                ("homogeneous", "static", 1000.0, None),
                ("homogeneous", "controller", 1000.0, 4),
                ("homogeneous", "adaptive", 990.0, 1),
                ("homogeneous", "dist_sync", 900.0, None),
                ("time-varying", "static", 600.0, None),
                ("time-varying", "adaptive", 880.0, 4),
            ],
            seed=1,
        ),
        table(
            [
                ("hetero-1-2", "static", 510.0, None),
                ("hetero-1-2", "oracle", 700.0, 2),
                ("hetero-1-2", "adaptive", 672.0, 3),
                ("homogeneous", "static", 1000.0, None),
                ("homogeneous", "controller", 1020.0, 4),
                ("homogeneous", "adaptive", 1000.0, 1),
                ("homogeneous", "dist_sync", 1000.0, None),
                ("time-varying", "static", 590.0, None),
                ("time-varying", "adaptive", 870.0, 5),
            ],
            seed=2,
        ),
    ],
    ignore_index=True,
)
ONE_RUN = "not judged: one run (make bench-repeats judges it)"


def test_a_target_measured_on_one_run_is_shown_and_not_judged():
    """Before `make bench-repeats`: no verdict at all, not even on a lone 1.185 over `static`
    in the homogeneous scenario, which the old rule met."""
    rows = benchtables.targets(RUNS, benchstats.facts(RUNS)).splitlines()
    assert rows[:2] == ["| target | measured | met | paired replay |", "|---|---|---|---|"]
    assert rows[2:] == [
        f"| `adaptive` fastest non-oracle policy, hetero-1-2 | 1.380× `static` | {ONE_RUN} | – |",
        f"| `adaptive` fastest non-oracle policy, homogeneous | 1.150× `dbs` | {ONE_RUN} | – |",
        f"| `adaptive` fastest non-oracle policy, time-varying | 1.500× `static` | {ONE_RUN} | – |",
        f"| `adaptive` within 5% of `oracle`, hetero-1-2 | 0.986× `oracle` | {ONE_RUN} | – |",
        "| `adaptive` balanced again within 5 iterations of each change, time-varying "
        f"| 7 iterations (worst change) | {ONE_RUN} | – |",
        f"| `adaptive` at most 2% slower than `static`, homogeneous | 1.185× `static` | {ONE_RUN} "
        "| – |",
        "| `static` (MPI) at least as fast per sample as MXNet `dist_sync`, homogeneous "
        f"| 1.053× `dist_sync` | {ONE_RUN} | – |",
    ]


def test_each_target_is_met_or_missed_on_the_median_of_its_paired_per_seed_ratios():
    runs = benchstats.races(RUNS, REPEATS)
    rows = benchtables.targets(RUNS, benchstats.facts(RUNS, runs), runs).splitlines()
    assert rows[2:] == [
        "| `adaptive` fastest non-oracle policy, hetero-1-2 "
        "| median 1.320× `static`, 1.318-1.380 over 3 seeds | met | – |",
        # 1% behind the controller on the median: missed, though seed 0 was 17% ahead
        "| `adaptive` fastest non-oracle policy, homogeneous "
        "| median 0.990× `controller`, 0.980-1.173 over 3 seeds | **missed** | – |",
        "| `adaptive` fastest non-oracle policy, time-varying "
        "| median 1.475× `static`, 1.467-1.500 over 3 seeds | met | – |",
        "| `adaptive` within 5% of `oracle`, hetero-1-2 "
        "| median 0.960× `oracle`, 0.943-0.986 over 3 seeds | met | – |",
        "| `adaptive` balanced again within 5 iterations of each change, time-varying "
        "| median 5 iterations (each run's worst change): 7 (seed 0), 4 (seed 1), 5 (seed 2) "
        "| met | – |",
        "| `adaptive` at most 2% slower than `static`, homogeneous "
        "| median 1.000× `static`, 0.990-1.185 over 3 seeds | met | – |",
        "| `static` (MPI) at least as fast per sample as MXNet `dist_sync`, homogeneous "
        "| median 1.053× `dist_sync`, 1.000-1.111 over 3 seeds | met | – |",
    ]


def test_the_fastest_policy_is_not_met_while_a_rival_ran_once():
    """A rival run once could be the faster on a rerun: not judged, naming it; but a repeated
    rival ahead on the median is a miss whatever the others."""
    repeated = [1.01, 1.02, 1.03]
    assert benchtables.fastest({"static": repeated, "dbs": [1.04]}) == (
        "median 1.020× `static`, 1.010-1.030 over 3 seeds",
        "not judged: one run of `dbs` (make bench-repeats judges it)",
    )
    assert benchtables.fastest({"static": repeated, "dbs": [1.005]}) == ("1.005× `dbs`", ONE_RUN)
    assert benchtables.fastest({"static": [0.99, 0.98, 1.2], "dbs": [1.04]})[1] == "**missed**"


def test_the_closest_replay_names_the_rival_adaptive_gained_least_on():
    values = {
        "replay": {"s": {"static": 1.0, "controller": 1.02}},
        "wins": {"s": {"static": 1, "controller": 9}},
        "ties": {"s": {"static": 8, "controller": 0}},
        "traces": {"s": 10},
    }
    assert benchtables.closest_replay(values, "s") == (
        "1.000× `static`, faster on 1 of 10, as fast on 8"
    )
    assert benchtables.closest_replay(values, "s", "controller") == (
        "1.020× `controller`, faster on 9 of 10"
    )
    assert benchtables.closest_replay({}, "s") == "–"


def test_the_paired_tables_come_under_their_captions_a_rival_per_column():
    replays = pd.DataFrame(
        [
            ("s", 0.0, "static", 1.1, 1, 1, 2),
            ("s", 0.07, "static", 1.05, 2, 0, 2),
            ("s", 0.07, "controller", 0.98, 0, 0, 1),
        ],
        columns=["scenario", "new_shape", "rival", "median", "wins", "ties", "traces"],
    )
    text = benchtables.paired(replays, "Free:", "At {new_shape:.0%}:")
    assert text == "\n".join(
        [
            "Free:",
            "",
            "| scenario | runs | `adaptive` × `static` | `adaptive` × `controller` |",
            "|---|---|---|---|",
            "| s | 2 | 1.100 (1/2, as fast on 1) | – |",
            "",
            "At 7%:",
            "",
            "| scenario | runs | `adaptive` × `static` | `adaptive` × `controller` |",
            "|---|---|---|---|",
            "| s | 2 | 1.050 (2/2) | 0.980 (0/1) |",
        ]
    )


def test_result_cells_show_policies_as_code_and_large_numbers_whole():
    cells = [benchtables.cell(v) for v in ("static", 1234.56, 0.12345, np.nan, 4, pd.NA)]
    assert cells == ["`static`", "1235", "0.123", "–", "4", "–"]
    shown = benchtables.results(RUNS[RUNS["scenario"] == "time-varying"]).splitlines()
    assert shown[0] == "### time-varying (lenet)"
    assert shown[-1] == "| `adaptive` | 2 | 900 | – | 0.100 | – | 0.860 | 7.000 |"


def test_the_repeated_races_show_every_seed_and_adaptives_ratio_to_each_rival():
    runs = table(
        [("s", p, v, None) for p, v in (("static", 100.0), ("static", 110.0), ("static", 90.0))]
        + [("s", "adaptive", v, None) for v in (105.0, 99.0, 108.0)]
    ).assign(seed=[0, 1, 2] * 2, final_test_accuracy=[0.85, 0.86, 0.87, 0.855, 0.865, 0.8651])
    rows = benchtables.repeated(runs, runs).splitlines()
    assert rows[0].startswith("| scenario | policy | samples/s, seeds 0, 1, 2 | median |")
    assert rows[2:] == [
        "| s | `static` | 100, 110, 90 | 100 | 1.050, 0.900, 1.200 | 0.8500, 0.8600, 0.8700 |",
        "| s | `adaptive` | 105, 99, 108 | 105 | – | 0.8550, 0.8650, 0.8651 |",
    ]


def test_the_accuracy_table_spans_each_scenarios_policies():
    runs = RUNS.assign(final_test_accuracy=np.linspace(0.85, 0.86, len(RUNS)))
    rows = benchtables.accuracy(runs).splitlines()
    assert rows[2] == "| hetero-1-2 | lenet | 3 | 0.8500 | 0.8522 | 0.0022 |"
    assert len(rows) == 2 + 3


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plot function saves, instead of their PNG files."""
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    return figures


def test_the_bench_throughput_has_a_bar_per_run_in_the_order_given(drawn):
    plots.plot_scenario_throughput(RUNS, None, "title", benchstats.ORDER)
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == RUNS["scenario"].unique().tolist()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["static", "dbs", "controller", "oracle", "adaptive", "dist_sync"]
    heights = {(c.get_label(), round(b.get_x() + b.get_width() / 2)): b.get_height()
               for c in ax.containers for b in c}  # fmt: skip
    assert heights["oracle", 0] == 700 and heights["dbs", 1] == 1030
    assert heights["adaptive", 2] == 900 and np.isnan(heights["dbs", 2])


def test_the_rank_share_sets_each_policy_on_one_axis_with_the_change_shaded(tmp_path, drawn):
    shares = [[4, 4], [4, 4], [6, 2], [6, 2], [4, 4]]
    change = {"rank": 1, "factor": 3, "start": 2, "end": 4}
    dirs = [
        make_run(tmp_path, "static", [[0.4, 0.4]] * 5, changes=[change]),
        make_run(tmp_path, "adaptive", [[0.4, 0.4]] * 5, "adaptive", shares=shares),
    ]
    plots.plot_rank_share(dirs, 1, None, "title")
    ax = drawn[0].axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["static", "adaptive"]
    assert ax.get_lines()[1].get_ydata().tolist() == [4, 4, 2, 2, 4]
    assert ax.get_ylabel() == "rank 1's share of B = 8"
    (span,) = ax.patches
    assert span.get_x() == 2 and span.get_width() == 2


def test_the_bench_figures_are_written_as_png(tmp_path):
    plots.plot_scenario_throughput(RUNS, tmp_path / "t.png", "title")
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")


def test_every_section_of_the_prose_is_one_line_a_paragraph_with_its_fields_filled():
    spec = importlib.util.spec_from_file_location("bench_report", SCRIPT)
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    prose = report.sections(report.SECTIONS)
    assert set(prose) == {
        "setup", "targets", "repeats", "replay", "replay-free", "replay-charged", "accuracy",
        "accuracy-seeds", "simulate", "projections", "torch",
    }  # fmt: skip
    assert all("\n" not in text for name, text in prose.items() if name != "setup")
    targets = prose["targets"].format(noise=0.031)
    assert "**met** or **missed** on the median of its paired per-seed ratios" in targets
    assert "on one run is not judged" in targets and "up to 3.1% here (the spread" in targets
    assert not any("within noise" in text for text in prose.values())
    assert "SGD (lr 0.01, momentum 0.9), 12 epochs a run" in prose["torch"].format(
        epochs=12, repeats=2
    )
    config = {
        "training": {"global_batch": 512, "epochs": 1, "optimizer": {"lr": 0.04, "momentum": 0.9}},
        "scenarios": {"flat": {}, "slow": {"slowdown": {3: 2}}},
    }
    setup = report.setup(prose["setup"], config).split("\n\n")
    assert "global batch 512, 1 epoch(s), SGD (lr 0.04, momentum 0.9," in setup[0]
    assert setup[1:] == ["- `flat`: identical ranks\n- `slow`: rank 3 2x slower"]

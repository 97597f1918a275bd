"""BENCHMARKS.md's tables, in markdown, from a benchmark's statistics (`benchstats`,
`benchreplay`): the targets and their verdicts (met or missed on the median of paired per-seed
ratios, a race run once not judged), the results by scenario, the repeated races, the
paired replay and the spread of the final accuracy. The prose around them is
`benchmarks/sections.md`'s."""

import numpy as np
import pandas as pd

from dynalloc.analysis.benchstats import (
    COMPETITORS,
    balance_verdict,
    lenet,
    mark,
    not_judged,
    per_seed,
    ratios,
    verdict,
)
from dynalloc.core.policies import REPLAYABLE

STATIC_SCENARIOS = ["homogeneous", "hetero-1-2", "hetero-1-4"]
COLUMNS = {
    "policy": "policy",
    "ranks": "ranks",
    "samples_per_s": "samples/s",
    "speedup": "× static",
    "mean_wait_fraction": "mean wait",
    "time_to_target_s": "time to 85% (s)",
    "final_test_accuracy": "final accuracy",
    "iterations_until_balanced": "iterations to balance",
}


def targets(table, values, runs=None):
    """One row per target: what was measured, whether it was met (`benchstats.verdict`: on the
    median of the per-seed ratios of `runs`, the races `make bench-repeats` ran again; a race
    run once is not judged) and, where there are replays, the paired replay."""
    lines = ["| target | measured | met | paired replay |", "|---|---|---|---|"]
    for scenario in sorted(table.loc[table["model"] == "lenet", "scenario"].unique()):
        rivals = [p for p in lenet(table, scenario).index if p in COMPETITORS]
        against = {rival: ratios(table, runs, scenario, "adaptive", rival) for rival in rivals}
        measured, met = fastest(against)
        lines.append(
            f"| `adaptive` fastest non-oracle policy, {scenario} | {measured} | {met} "
            f"| {closest_replay(values, scenario)} |"
        )
    for scenario in STATIC_SCENARIOS:
        if "oracle" in lenet(table, scenario).index:
            oracle = ratios(table, runs, scenario, "adaptive", "oracle")
            measured, met = verdict(oracle, 0.95, "oracle")
            lines.append(
                f"| `adaptive` within 5% of `oracle`, {scenario} | {measured} | {met} | – |"
            )
    if "adaptive" in lenet(table, "time-varying").index:
        worst = per_seed(table, runs, "time-varying", "adaptive", "iterations_until_balanced")
        measured, met = balance_verdict(worst, 5)
        lines.append(
            "| `adaptive` balanced again within 5 iterations of each change, time-varying | "
            f"{measured} | {met} | – |"
        )
    if "static" in lenet(table, "homogeneous").index:
        homogeneous = ratios(table, runs, "homogeneous", "adaptive", "static")
        measured, met = verdict(homogeneous, 0.98, "static")
        lines.append(
            f"| `adaptive` at most 2% slower than `static`, homogeneous | {measured} | {met} "
            f"| {closest_replay(values, 'homogeneous', 'static')} |"
        )
    for scenario, rows in ((s, lenet(table, s)) for s in table["scenario"].unique()):
        if {"static", "dist_sync"} <= set(rows.index):
            baseline = ratios(table, runs, scenario, "static", "dist_sync")
            measured, met = verdict(baseline, 1.0, "dist_sync")
            lines.append(
                f"| `static` (MPI) at least as fast per sample as MXNet `dist_sync`, {scenario} "
                f"| {measured} | {met} | – |"
            )
    return "\n".join(lines)


def fastest(against):
    """(what was measured, verdict) for adaptive's ratios to each rival (`against`: {rival:
    per-seed ratios}), shown against the closest on the median. Missed when that median is
    below 1; met only when every rival ran again, since a rival run once could be the faster."""
    closest = min(against, key=lambda rival: np.median(against[rival]))
    measured, met = verdict(against[closest], 1.0, closest)
    once = [rival for rival, seeds in against.items() if len(seeds) == 1]
    if once and met == mark(True):
        met = not_judged(once)
    return measured, met


def closest_replay(values, scenario, rival=None):
    """adaptive's replayed ratio to `rival` (by default its closest) and on how many runs'
    speeds it was the faster (and as fast); a dash without replays."""
    replays = values.get("replay", {}).get(scenario)
    if not replays:
        return "–"
    rival = rival or min(replays, key=replays.get)
    wins, traces = values["wins"][scenario][rival], values["traces"][scenario]
    ties = values["ties"][scenario][rival]
    return f"{replays[rival]:.3f}× `{rival}`, faster on {wins} of {traces}" + tied(ties)


def tied(ties):
    """The runs on which adaptive held the rival's split all along: a tie, not a loss."""
    return f", as fast on {ties}" if ties else ""


def paired(replays, free, charged):
    """The replay tables (`benchreplay.replay_ratios`): adaptive × each rival, each table under
    its caption: `free` without the new-shape cost, `charged` (a template of `new_shape`) with."""
    lines = []
    rivals = [p for p in REPLAYABLE if p in set(replays["rival"])]
    for new_shape, rows in replays.groupby("new_shape"):
        lines += [
            free if new_shape == 0 else charged.format(new_shape=new_shape),
            "",
            "| scenario | runs | " + " | ".join(f"`adaptive` × `{p}`" for p in rivals) + " |",
            "|---|---|" + "---|" * len(rivals),
        ]
        for scenario, mine in rows.groupby("scenario"):
            mine = mine.set_index("rival")
            cells = [
                f"{mine.loc[p, 'median']:.3f} ({mine.loc[p, 'wins']}/{mine.loc[p, 'traces']}"
                f"{tied(mine.loc[p, 'ties'])})"
                if p in mine.index
                else "–"
                for p in rivals
            ]
            lines.append(f"| {scenario} | {mine['traces'].max()} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def repeated(table, runs):
    """Every repeated race: each policy's samples/s per seed, and adaptive's ratio to it."""
    seeds = "seeds " + ", ".join(str(seed) for seed in sorted(runs["seed"].unique()))
    lines = [
        f"| scenario | policy | samples/s, {seeds} | median | `adaptive` ×, {seeds} "
        f"| final accuracy, {seeds} |",
        "|---|---|---|---|---|---|",
    ]
    for scenario, rows in runs.groupby("scenario", sort=False):
        for policy, mine in rows.groupby("policy", sort=False):
            mine = mine.sort_values("seed")
            sps = mine["samples_per_s"]
            versus = "–"
            if policy != "adaptive":
                against = ratios(table, runs, scenario, "adaptive", policy)
                versus = ", ".join(f"{ratio:.3f}" for ratio in against)
            accuracy = ", ".join(f"{a:.4f}" for a in mine["final_test_accuracy"])
            lines.append(
                f"| {scenario} | `{policy}` | {', '.join(f'{v:.0f}' for v in sps)} | "
                f"{sps.median():.0f} | {versus} | {accuracy} |"
            )
    return "\n".join(lines)


def results(table):
    """Every run of `make bench`, a table per (model, scenario) under its own heading."""
    parts = []
    for (model, scenario), rows in table.groupby(["model", "scenario"], sort=False):
        parts += [f"### {scenario} ({model})", "", markdown(rows), ""]
    return "\n".join(parts)


def markdown(rows):
    shown = rows[list(COLUMNS)].rename(columns=COLUMNS)
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    for _, row in shown.iterrows():
        lines.append("| " + " | ".join(cell(value) for value in row) + " |")
    return "\n".join(lines)


def cell(value):
    if isinstance(value, str):
        return f"`{value}`"
    if pd.isna(value):
        return "–"
    if isinstance(value, float | np.floating):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3f}"
    return str(value)


def accuracy(table):
    """The spread of the final test accuracy across the policies of each scenario: the same SGD
    differs by float summation order only."""
    lines = ["| scenario | model | runs | lowest | highest | spread |", "|---|---|---|---|---|---|"]
    for (model, scenario), rows in table.groupby(["model", "scenario"], sort=False):
        acc = rows["final_test_accuracy"]
        lines.append(
            f"| {scenario} | {model} | {len(acc)} | {acc.min():.4f} | {acc.max():.4f} | "
            f"{acc.max() - acc.min():.4f} |"
        )
    return "\n".join(lines)

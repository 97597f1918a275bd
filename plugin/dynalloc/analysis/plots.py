"""The report's figures: what the allocation did (shares), why (timing), what it bought
(convergence, throughput); and BENCHMARKS.md's (one rank's share under each policy, throughput
by scenario).

Every figure gives a policy the same colour (`policy_colours`); the ranks of one run are shades
of its policy's colour (`rank_shades`), so no colour means a rank in one figure and a policy in
another. Figures are built on matplotlib's `Figure` (Agg canvas, no pyplot state) and saved as
PNG through `atomic_write`, so a reader never sees half a file.
"""

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter

from dynalloc.analysis.runs import load_run
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

DPI = 110

# The policies' colours: tab10's, in this order, in every figure; other names take the colours
# after them (`policy_colours`).
POLICY_ORDER = ("static", "proportional", "dbs", "controller", "oracle", "adaptive", "dist_sync")
PALETTE = tuple(to_hex(c) for c in (*colormaps["tab10"].colors, *colormaps["Dark2"].colors))
# Line styles of the ranks of a run (shares), and of the runs of one policy (convergence).
STYLES = ("-", "--", "-.", ":")


def policy_colours(policies=()):
    """{policy: colour}: each of POLICY_ORDER always its own colour, whatever else is drawn;
    each other name of `policies` one of the colours after them, in sorted order (cycling)."""
    colours = dict(zip(POLICY_ORDER, PALETTE, strict=False))
    extra = PALETTE[len(POLICY_ORDER) :]
    others = sorted(set(policies) - set(colours))
    colours.update((name, extra[i % len(extra)]) for i, name in enumerate(others))
    return colours


def rank_shades(colour, ranks):
    """`ranks` shades of one colour, rank 0 the darkest and the last the lightest."""
    if ranks == 1:
        return [to_hex(colour)]
    rgb = np.array(to_rgb(colour))
    dark, light = rgb * 0.55, rgb + (1 - rgb) * 0.55
    return [to_hex(dark + (light - dark) * r / (ranks - 1)) for r in range(ranks)]


def plot_shares(run_dirs, path):
    """Per run, each rank's share of the global batch over iterations: a shade of the run's
    policy colour and a line style per rank."""

    def draw(ax, run, colour):
        ranks = run.iterations.groupby("rank")
        for (rank, rows), shade in zip(ranks, rank_shades(colour, ranks.ngroups), strict=True):
            style = STYLES[rank % len(STYLES)]
            ax.plot(rows["iteration"], rows["batch_size"], style, color=shade, label=f"rank {rank}")

    _panels(_runs(run_dirs), path, "Share of the global batch per rank", "share (samples)", draw)


def plot_timing(run_dirs, path):
    """Per run, each rank's compute time (solid), wait for the slowest (dashed) and, where it
    waited for its samples (a streamed dataset), that wait (dotted), a shade of the run's policy
    colour per rank."""

    def draw(ax, run, colour):
        ranks = run.iterations.groupby("rank")
        reads = run.iterations["data_s"].max() > 0.05 * run.iterations["compute_s"].median()
        for (rank, rows), shade in zip(ranks, rank_shades(colour, ranks.ngroups), strict=True):
            x = rows["iteration"]
            ax.plot(x, rows["compute_s"], color=shade, label=f"rank {rank} compute")
            ax.plot(x, rows["wait_s"], "--", color=shade, label=f"rank {rank} wait")
            if reads:
                ax.plot(x, rows["data_s"], ":", color=shade, label=f"rank {rank} data")

    _panels(_runs(run_dirs), path, "Compute and wait time per rank", "time (s)", draw)


def plot_convergence(run_dirs, path):
    """Train loss and test accuracy against training wall time, one line per run in its
    policy's colour (the runs of one policy told apart by line style)."""
    runs = _runs(run_dirs)
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    loss, accuracy = fig.subplots(1, 2)
    for run, label, (colour, style) in zip(runs, _labels(runs), _run_styles(runs), strict=True):
        epochs, look = run.epochs, {"color": colour, "ls": style, "marker": "o", "ms": 3}
        loss.plot(epochs["wall_s"], epochs["train_loss"], label=label, **look)
        accuracy.plot(epochs["wall_s"], epochs["test_accuracy"], **look)
    loss.set(yscale="log", title="Train loss", xlabel="training time (s)", ylabel="loss (log)")
    accuracy.set(title="Test accuracy", xlabel="training time (s)", ylabel="accuracy")
    loss.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    loss.yaxis.set_major_formatter("{x:g}")
    loss.yaxis.set_minor_formatter(NullFormatter())
    accuracy.yaxis.set_major_formatter("{x:.0%}")
    for ax in (loss, accuracy):
        ax.grid(alpha=0.3)
    fig.legend(loc="outside right center", title="policy, scenario")
    fig.suptitle("Convergence against wall time")
    _save(fig, path)


def plot_throughput(summary, path, speedup=None):
    """Samples/s of each policy, grouped by scenario (mean over seeds, error bars min to max),
    in its policy's colour; with `speedup` (compare's table) each bar also carries its ratio to
    `static` in the same group, the mean of the runs' ratios."""
    if summary.empty:
        raise DynallocError("no runs to plot")
    varying = [c for c in ("dataset", "model", "ranks") if summary[c].nunique() > 1]
    keys = [*varying, "scenario"]
    stats = summary.groupby([*keys, "policy"])["samples_per_s"].agg(["mean", "min", "max"])
    if speedup is not None:
        stats["ratio"] = speedup.groupby([*keys, "policy"])["speedup"].mean()
    groups = stats.index.droplevel("policy").unique()
    policies = sorted(stats.index.get_level_values("policy").unique(), key=_in_order)
    colours = policy_colours(policies)
    width = 0.8 / len(policies)
    fig = Figure(
        figsize=(max(6.0, 1.0 + 0.6 * len(groups) * len(policies)), 4.5), layout="constrained"
    )
    ax = fig.subplots()
    for i, policy in enumerate(policies):
        rows = stats.xs(policy, level="policy").reindex(groups)
        positions = [g + (i - (len(policies) - 1) / 2) * width for g in range(len(groups))]
        spread = [rows["mean"] - rows["min"], rows["max"] - rows["mean"]]
        errors = spread if (rows["max"] > rows["min"]).any() else None
        bars = ax.bar(
            positions,
            rows["mean"],
            width,
            yerr=errors,
            capsize=3,
            color=colours[policy],
            label=policy,
        )
        ratios = rows["ratio"] if "ratio" in rows else [math.nan] * len(rows)
        labels = [_bar_label(v, r) for v, r in zip(rows["mean"], ratios, strict=True)]
        ax.bar_label(bars, labels, fontsize=8, padding=2)
    names = [", ".join(str(v) for v in (g if isinstance(g, tuple) else (g,))) for g in groups]
    ax.set_xticks(range(len(groups)), [name or "(no scenario)" for name in names])
    title = "Throughput by policy" + (" (× static of the group)" if speedup is not None else "")
    ax.set(xlabel=", ".join(keys), ylabel="throughput (samples/s)", title=title)
    ax.margins(y=0.2)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="policy")
    _save(fig, path)


def plot_rank_share(run_dirs, rank, path, title):
    """One rank's share of the global batch over iterations, a line per run named by its policy,
    on one axis, the first run's changes of speed shaded: how each policy follows a change."""
    runs = _runs(run_dirs)
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.subplots()
    for run, (colour, style) in zip(runs, _run_styles(runs), strict=True):
        rows = run.iterations[run.iterations["rank"] == rank]
        x, y = rows["iteration"], rows["batch_size"]
        ax.plot(x, y, style, lw=1, color=colour, label=run.policy)
    _shade_changes(ax, runs[0])
    ylabel = f"rank {rank}'s share of B = {runs[0].metrics['global_batch']}"
    ax.set(title=title, xlabel="iteration", ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncols=3)
    _save(fig, path)


def plot_scenario_throughput(summary, path, title, policies=()):
    """Samples/s of one run per (scenario, policy), a bar each, grouped by scenario: the
    policies in the order of `policies`, any others after them (in POLICY_ORDER's order)."""
    if summary.empty:
        raise DynallocError("no runs to plot")
    table = summary.pivot(index="scenario", columns="policy", values="samples_per_s")
    order = [p for p in policies if p in table.columns]
    order += sorted(set(table.columns) - set(order), key=_in_order)
    width = 0.8 / len(order)
    colours = policy_colours(order)
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, policy in enumerate(order):
        offset = (i - (len(order) - 1) / 2) * width
        positions = [g + offset for g in range(len(table))]
        ax.bar(positions, table[policy], width, color=colours[policy], label=policy)
    ax.set_xticks(range(len(table)), table.index)
    ax.set(ylabel="samples/s", title=title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(ncols=4, fontsize=8)
    _save(fig, path)


def _runs(run_dirs):
    if not run_dirs:
        raise DynallocError("no runs to plot")
    return [load_run(d) for d in run_dirs]


def _labels(runs):
    """'policy, scenario' per run, with the other axes that tell the runs apart (model,
    dataset, ranks, seed) where that is not unique, and the run's name only where even those
    are the same."""
    axes = [("model", "{}"), ("dataset", "{}"), ("ranks", "R={}"), ("seed", "seed {}")]

    def axis(run, name):
        value = run.labels.get(name, run.metrics.get(name, run.config.get(name)))
        return None if value is None else str(value)

    def label(run, names):
        extra = [form.format(axis(run, name)) for name, form in axes if name in names]
        return ", ".join(filter(None, (run.policy, run.scenario, *extra)))

    varying = {name for name, _ in axes if len({axis(run, name) for run in runs}) > 1}
    labels = [label(run, varying) for run in runs]
    return [
        text if labels.count(text) == 1 else f"{text} [{run.name}]"
        for run, text in zip(runs, labels, strict=True)
    ]


def _run_styles(runs):
    """(colour, line style) per run: its policy's colour, and a line style per run of the same
    policy, in order."""
    colours, seen = policy_colours(run.policy for run in runs), []
    styles = []
    for run in runs:
        styles.append((colours[run.policy], STYLES[seen.count(run.policy) % len(STYLES)]))
        seen.append(run.policy)
    return styles


def _bar_label(value, ratio):
    """A bar's samples/s, and under it its ratio to static where there is one."""
    if math.isnan(value):
        return ""
    number = f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return number if math.isnan(ratio) else f"{number}\n{ratio:.2f}×"


def _panels(runs, path, title, ylabel, draw):
    """One panel per run, two per row, each drawn by `draw(ax, run, colour)` with the run's
    policy colour, its title in that colour."""
    columns = min(len(runs), 2)
    rows = math.ceil(len(runs) / columns)
    fig = Figure(figsize=(6.5 * columns, 3.8 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(runs) :]:
        fig.delaxes(ax)
    colours = policy_colours(run.policy for run in runs)
    for ax, run, label in zip(axes, runs, _labels(runs), strict=False):
        draw(ax, run, colours[run.policy])
        _shade_changes(ax, run)
        _mark_restarts(ax, run)
        ax.set_title(label, color=colours[run.policy], fontweight="bold")
        ax.set(xlabel="iteration", ylabel=ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(title)
    _save(fig, path)


def _shade_changes(ax, run):
    """Grey spans where the scenario changed a rank's speed."""
    last = run.iterations["iteration"].max()
    changes = (run.config.get("scenario") or {}).get("changes") or ()
    for i, change in enumerate(changes):
        end = last if change.get("end") is None else change["end"]
        ax.axvspan(change["start"], end, color="0.88", zorder=0, label="" if i else "speed change")


def _mark_restarts(ax, run):
    """A dotted line where an elastic run went on with the ranks that remained after a loss
    (the `ranks` column changed), labelled with the ranks before and after; the ranks are
    numbered anew from there."""
    if "ranks" not in run.iterations:
        return
    ranks = run.iterations.groupby("iteration")["ranks"].first()
    changed = ranks[ranks.diff().fillna(0) != 0]
    for i, (iteration, after) in enumerate(changed.items()):
        before = ranks[ranks.index < iteration].iloc[-1]
        ax.axvline(iteration, color="0.3", linestyle=":", label="" if i else "restart")
        where = {"xycoords": ("data", "axes fraction"), "textcoords": "offset points",
                 "bbox": {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}}  # fmt: skip
        text = f"{before} -> {after} ranks"
        ax.annotate(text, (iteration, 0.03), xytext=(3, 0), fontsize="small", color="0.3", **where)


def _in_order(policy):
    """Sort key: the policies of POLICY_ORDER in that order (static first), then the others."""
    known = policy in POLICY_ORDER
    return (not known, POLICY_ORDER.index(policy) if known else 0, policy)


def _save(fig, path):
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=DPI)

"""The report's figures: what the allocation did (shares), why (timing), what it bought
(convergence, throughput); and BENCHMARKS.md's (one rank's share under each policy, throughput
by scenario).

Figures are built on matplotlib's `Figure` (Agg canvas, no pyplot state) and saved as PNG through
`atomic_write`, so a reader never sees half a file.
"""

import math

from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter

from dynalloc.analysis.runs import load_run
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

DPI = 110


def plot_shares(run_dirs, path):
    """Per run, each rank's share of the global batch over iterations."""

    def draw(ax, run):
        for rank, rows in run.iterations.groupby("rank"):
            ax.plot(rows["iteration"], rows["batch_size"], label=f"rank {rank}")

    _panels(_runs(run_dirs), path, "Share of the global batch per rank", "share (samples)", draw)


def plot_timing(run_dirs, path):
    """Per run, each rank's compute time (solid) and wait for the slowest (dashed)."""

    def draw(ax, run):
        for rank, rows in run.iterations.groupby("rank"):
            line = ax.plot(rows["iteration"], rows["compute_s"], label=f"rank {rank} compute")[0]
            ax.plot(
                rows["iteration"],
                rows["wait_s"],
                "--",
                color=line.get_color(),
                label=f"rank {rank} wait",
            )

    _panels(_runs(run_dirs), path, "Compute and wait time per rank", "time (s)", draw)


def plot_convergence(run_dirs, path):
    """Train loss and test accuracy against training wall time, one line per run."""
    runs = _runs(run_dirs)
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    loss, accuracy = fig.subplots(1, 2)
    for run, label in zip(runs, _labels(runs), strict=True):
        epochs = run.epochs
        line = loss.plot(epochs["wall_s"], epochs["train_loss"], "o-", ms=3, label=label)[0]
        accuracy.plot(epochs["wall_s"], epochs["test_accuracy"], "o-", ms=3, color=line.get_color())
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


def plot_throughput(summary, path):
    """Samples/s of each policy, grouped by scenario (mean over seeds, error bars min to max)."""
    if summary.empty:
        raise DynallocError("no runs to plot")
    varying = [c for c in ("dataset", "model", "ranks") if summary[c].nunique() > 1]
    keys = [*varying, "scenario"]
    stats = summary.groupby([*keys, "policy"])["samples_per_s"].agg(["mean", "min", "max"])
    groups = stats.index.droplevel("policy").unique()
    policies = sorted(stats.index.get_level_values("policy").unique(), key=_static_first)
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
        bars = ax.bar(positions, rows["mean"], width, yerr=errors, capsize=3, label=policy)
        values = ["" if math.isnan(v) else f"{v:.0f}" for v in rows["mean"]]
        ax.bar_label(bars, values, fontsize=8, padding=2)
    names = [", ".join(str(v) for v in (g if isinstance(g, tuple) else (g,))) for g in groups]
    ax.set_xticks(range(len(groups)), [name or "(no scenario)" for name in names])
    ax.set(xlabel=", ".join(keys), ylabel="throughput (samples/s)", title="Throughput by policy")
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title="policy")
    _save(fig, path)


def plot_rank_share(run_dirs, rank, path, title):
    """One rank's share of the global batch over iterations, a line per run named by its policy,
    on one axis, the first run's changes of speed shaded: how each policy follows a change."""
    runs = _runs(run_dirs)
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.subplots()
    for run in runs:
        rows = run.iterations[run.iterations["rank"] == rank]
        ax.plot(rows["iteration"], rows["batch_size"], lw=1, label=run.policy)
    _shade_changes(ax, runs[0])
    ylabel = f"rank {rank}'s share of B = {runs[0].metrics['global_batch']}"
    ax.set(title=title, xlabel="iteration", ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncols=3)
    _save(fig, path)


def plot_scenario_throughput(summary, path, title, policies=()):
    """Samples/s of one run per (scenario, policy), a bar each, grouped by scenario: the
    policies in the order of `policies`, any others after them (static first)."""
    if summary.empty:
        raise DynallocError("no runs to plot")
    table = summary.pivot(index="scenario", columns="policy", values="samples_per_s")
    order = [p for p in policies if p in table.columns]
    order += sorted(set(table.columns) - set(order), key=_static_first)
    width = 0.8 / len(order)
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, policy in enumerate(order):
        offset = (i - (len(order) - 1) / 2) * width
        ax.bar([g + offset for g in range(len(table))], table[policy], width, label=policy)
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
    """'policy, scenario' per run; the run's name is added where that is not unique."""
    plain = [", ".join(filter(None, (run.policy, run.scenario))) for run in runs]
    return [
        label if plain.count(label) == 1 else f"{label} [{run.name}]"
        for run, label in zip(runs, plain, strict=True)
    ]


def _panels(runs, path, title, ylabel, draw):
    """One panel per run, two per row, each drawn by `draw(ax, run)`."""
    columns = min(len(runs), 2)
    rows = math.ceil(len(runs) / columns)
    fig = Figure(figsize=(6.5 * columns, 3.8 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(runs) :]:
        fig.delaxes(ax)
    for ax, run, label in zip(axes, runs, _labels(runs), strict=False):
        draw(ax, run)
        _shade_changes(ax, run)
        ax.set(title=label, xlabel="iteration", ylabel=ylabel)
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


def _static_first(policy):
    return (policy != "static", policy)


def _save(fig, path):
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=DPI)

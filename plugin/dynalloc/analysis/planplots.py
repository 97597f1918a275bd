"""The plots of `dynalloc simulate`: each policy's speedup over `static` against the size of the
cluster and against its heterogeneity, one panel per cluster, the exact optimum as the dashed
ceiling. The policies keep the colours of every other figure (`plots.policy_colours`)."""

from matplotlib.figure import Figure

from dynalloc.analysis.plots import DPI, POLICY_ORDER, policy_colours
from dynalloc.fsutil import atomic_write

SWEEPS = {  # sweep: (file, x axis, its label, log scale)
    "size": ("simulate_size.png", "ranks", "ranks (log scale)", True),
    "heterogeneity": (
        "simulate_heterogeneity.png",
        "value",
        "heterogeneity h (slowness 1 + h (s - 1))",
        False,
    ),
}


def plot_sweeps(table, out):
    """One PNG in `out` per sweep that `table` (the command's rows) holds; their paths."""
    paths = []
    for sweep, (name, x, label, log) in SWEEPS.items():
        rows = table[table["sweep"] == sweep]
        if not rows.empty:
            paths.append(out / name)
            plot_speedup(rows, x, label, log, paths[-1])
    return paths


def plot_speedup(rows, x, label, log, path):
    clusters = list(dict.fromkeys(rows["cluster"]))
    fig = Figure(figsize=(6 * len(clusters), 4.2), layout="constrained")
    axes = fig.subplots(1, len(clusters), squeeze=False).ravel()
    policies = [p for p in dict.fromkeys(rows["policy"]) if p != "optimum"]
    policies.sort(key=lambda p: POLICY_ORDER.index(p) if p in POLICY_ORDER else len(POLICY_ORDER))
    colours = policy_colours(policies)
    for ax, cluster in zip(axes, clusters, strict=True):
        mine = rows[rows["cluster"] == cluster].sort_values(x)
        for policy in [*policies, "optimum"]:
            line = mine[mine["policy"] == policy]
            look = (
                {"color": "black", "ls": "--"}
                if policy == "optimum"
                else {"color": colours[policy]}
            )
            ax.plot(line[x], line["speedup"], marker="o", ms=3, label=policy, **look)
        if log:
            ax.set_xscale("log", base=2)
            ticks = sorted(mine[x].unique())
            ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
            ax.minorticks_off()
        ax.set(title=cluster, xlabel=label, ylabel="speedup over static")
        ax.grid(alpha=0.3)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), title="policy")
    fig.suptitle("Projected speedup over static (dynalloc simulate)")
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=DPI)

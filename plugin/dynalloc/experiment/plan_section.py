"""The pipeline config's `simulate` section (schema-checked; config/README.md): what the simulate
rule asks `dynalloc simulate` for, and which files it makes, kept out of the rule file so that
it only wires paths."""

# Each sweep of the section and the figure the command draws for it.
SWEEP_PLOTS = {"sizes": "simulate_size", "heterogeneity": "simulate_heterogeneity"}


def plots(section):
    """The figures' names (without .png) that the section's sweeps make."""
    return [name for key, name in SWEEP_PLOTS.items() if (section or {}).get(key)]


def options(section):
    """The command's options for the section, one string."""
    section = section or {}
    words = ["--policies", *section["policies"]] if section.get("policies") else []
    for key in SWEEP_PLOTS:
        if section.get(key):
            words += [f"--{key}", *map(str, section[key])]
    if section.get("iterations"):
        words += ["--iterations", str(section["iterations"])]
    return " ".join(words)


def outputs(section, results):
    """Every file the simulate rule writes under `results`; none without a section."""
    if not section:
        return []
    names = ["simulate.csv", "simulate.html", *(f"{name}.png" for name in plots(section))]
    return [f"{results}/simulate/{name}" for name in names]

"""Which of the package's extras (pyproject.toml) installs a third-party module a subcommand needs.

`stage`, `train` and `baseline` need the `train` extra (MXNet with the numpy it imports with,
mpi4py, mpich); `summarize`, `compare` and `replay` the `analysis` extra (pandas, matplotlib);
`train` of a `framework: torch` run the `torch` extra.
The command line turns a `ModuleNotFoundError` for one of these modules into one line naming the
extra; a missing module that no extra installs is a broken install or a bug and keeps its
traceback. Standard library only: this module runs exactly where the extras are missing.
"""

EXTRAS = {
    "mxnet": "train",
    "mpi4py": "train",
    "pandas": "analysis",
    "matplotlib": "analysis",
    "torch": "torch",
}


def missing_extra(error):
    """The one-line message for `error` (a ModuleNotFoundError) when an extra installs the
    missing module, else None."""
    extra = EXTRAS.get(error.name)  # the first missing module: `import pandas.x` names pandas
    if extra is None:
        return None
    return (
        f'needs {error.name}, which is not installed: install the "{extra}" extra '
        f'(pip install ".[{extra}]" in the dynalloc checkout)'
    )

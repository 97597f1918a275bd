"""A run config's `script` (a user's own training script instead of `model`): its keys checked,
and what dynalloc builds for a script only when its config names it."""

from pathlib import Path

from dynalloc.errors import DynallocError, SharedError

SCRIPT_BUILDS = ("model", "optimizer")  # a script's run config names them only if it uses them


def built_by_dynalloc(config, key):
    """config[key] (model, optimizer) for dynalloc to build; a script run's config that names
    none is told in one line (every rank reads the same config at the same point)."""
    if config[key] is None:
        raise SharedError(
            f"config key {key!r} is unset: a script run's config names the {key} it builds "
            "through dynalloc (a script that builds its own needs none)"
        )
    return config[key]


def check_script(config):
    """The script as an absolute path (ranks may start elsewhere), its arguments as strings."""
    script, arguments = config["script"], config["script_args"]
    if script is not None:
        if not isinstance(script, str) or not Path(script).expanduser().is_file():
            raise DynallocError(f"config key 'script' must name a Python file, got {script!r}")
        config["script"] = str(Path(script).expanduser().resolve())
    if not isinstance(arguments, list) or not all(
        isinstance(a, str | int | float) for a in arguments
    ):
        raise DynallocError(
            f"config key 'script_args' must be a list of strings, got {arguments!r}"
        )
    config["script_args"] = [str(a) for a in arguments]

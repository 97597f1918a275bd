"""A user's own training script run by `dynalloc train` (`script:` in the run config): each rank
becomes `python SCRIPT SCRIPT_ARGS...` under the same launcher, told its run config and run
directory through two environment variables (the arguments stay the script's own), which
`Recorder.from_environment()` reads."""

import os
import sys

from dynalloc.errors import DynallocError

CONFIG_VARIABLE, RUN_DIR_VARIABLE = "DYNALLOC_CONFIG", "DYNALLOC_RUN_DIR"


def exec_script(config, config_path, out):
    """Replace this rank's process by the run config's script (never returns)."""
    os.environ[CONFIG_VARIABLE] = os.path.abspath(config_path)
    os.environ[RUN_DIR_VARIABLE] = os.path.abspath(out)
    script = [config["script"], *config["script_args"]]
    os.execv(sys.executable, [sys.executable, *script])


def script_run():
    """(run config path, run directory) of the script run that started this process."""
    missing = [v for v in (CONFIG_VARIABLE, RUN_DIR_VARIABLE) if not os.environ.get(v)]
    if missing:
        raise DynallocError(
            f"{' and '.join(missing)} not set: run the script through `dynalloc train` "
            "with `script:` in its run config (or set them to a run config and directory)"
        )
    return os.environ[CONFIG_VARIABLE], os.environ[RUN_DIR_VARIABLE]

"""`pip install ".[train]"` and `".[analysis]"` into fresh venvs, as docs/reference.md tells a user.

The package is installed from a copy of the working tree (not editable, and without setuptools
leaving build/ in the checkout) through the configured index; the two installs run side by
side. The train env then stages the embedded mnist5k digits and trains on 2 MPI ranks with its
own mpiexec; the analysis env (numpy 2) summarizes and compares that run.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
import yaml
from helpers import ENV, ROOT

pytestmark = pytest.mark.slow

INSTALL_TIMEOUT_S = 900
# A user's shell: no interpreter settings inherited from the test env; pip's own config is kept.
USER_ENV = {k: v for k, v in ENV.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def source_copy(destination):
    """The files the package builds from, as they are in the working tree."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "plugin", destination / "plugin", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, destination)
    return destination


def start_install(venv, requirement):
    """`python3.11 -m venv VENV && VENV/bin/pip install REQUIREMENT` in the background, its
    output in VENV.log. --no-compile halves pip's CPU time (each module compiles on first
    import instead), which matters on a busy CI machine."""
    script = '"$1" -m venv "$2" && "$2/bin/pip" install --quiet --no-compile "$3"'
    command = ["bash", "-c", script, "install", sys.executable, str(venv), requirement]
    with open(f"{venv}.log", "w") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=USER_ENV, start_new_session=True
        )


def run(venv, *args, launcher=(), timeout=300):
    command = [*map(str, launcher), str(venv / "bin" / args[0]), *map(str, args[1:])]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=USER_ENV)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    """{extra: venv} for the train and analysis extras, each installed into a fresh venv."""
    tmp = tmp_path_factory.mktemp("extras")
    source = source_copy(tmp / "source")
    venvs = {extra: tmp / f"venv-{extra}" for extra in ("train", "analysis")}
    installs = {extra: start_install(venv, f"{source}[{extra}]") for extra, venv in venvs.items()}
    for extra, install in installs.items():
        try:
            code = install.wait(timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in installs.values():  # bash and its pip, by their process group
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
            raise
        log = venvs[extra].with_name(f"venv-{extra}.log")
        assert code == 0, f'pip install ".[{extra}]" failed:\n{log.read_text()[-3000:]}'
    return venvs


@pytest.fixture(scope="module")
def trained(envs, tmp_path_factory):
    """A 2-rank run trained by the train env on the mnist5k digits it staged."""
    tmp = tmp_path_factory.mktemp("trained")
    train = envs["train"]
    run(train, "dynalloc", "stage", "--source", "mnist5k", "--out", tmp / "mnist5k")
    config = tmp / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": str(tmp / "mnist5k"),
                "model": "mlp",
                "global_batch": 64,
                "iterations": 8,
                "policy": {"name": "adaptive"},
                "scenario": {"slowdown": [1, 2]},
            }
        )
    )
    launcher = [train / "bin" / "mpiexec", "-n", 2]
    run(train, "dynalloc", "train", "--config", config, "--out", tmp / "run", launcher=launcher)
    return tmp / "run"


def test_the_train_extra_stages_and_trains_on_two_ranks(envs, trained):
    versions = run(envs["train"], "python", "-c", "import mxnet, numpy; print(numpy.__version__)")
    assert versions.stdout.startswith("1.23."), versions.stdout
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["ranks"] == 2 and metrics["iterations"] == 8


def test_the_analysis_extra_summarizes_and_compares_that_run(envs, trained, tmp_path):
    analysis = envs["analysis"]
    found = run(analysis, "python", "-c", "import importlib.util as u; print(u.find_spec('mxnet'))")
    assert found.stdout.strip() == "None"  # the analysis env holds no training stack
    summary = tmp_path / "summary.json"
    run(analysis, "dynalloc", "summarize", "--run-dir", trained, "--out", summary)
    assert json.loads(summary.read_text())["ranks"] == 2
    tables, plots = tmp_path / "tables", tmp_path / "plots"
    outputs = ["--tables-dir", tables, "--plots-dir", plots]
    run(analysis, "dynalloc", "compare", "--summaries", summary, "--runs", trained, *outputs)
    assert (tables / "summary.csv").exists() and any(plots.glob("*.png"))


def test_the_train_env_summarizes_its_own_runs(envs, trained, tmp_path):
    # mlxtend brings pandas and matplotlib versions that still take numpy 1.23: one env can
    # hold both extras (docs/reference.md).
    summary = tmp_path / "summary.json"
    run(envs["train"], "dynalloc", "summarize", "--run-dir", trained, "--out", summary)
    assert json.loads(summary.read_text())["ranks"] == 2

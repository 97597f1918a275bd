"""A subcommand whose extra is missing says in one line which extra to install.

Runs in the workflow env, which has no MXNet and no mpi4py (the `train` extra's modules); the
`analysis` extra's modules are hidden from a child interpreter with `sys.modules[name] = None`.
"""

import subprocess
import sys
import tomllib

import pytest
import yaml
from dynalloc.extras import EXTRAS, missing_extra
from helpers import ENV, ROOT, dynalloc

BLOCKED_MAIN = "import sys; sys.modules[{module!r}] = None; from dynalloc.cli import main; "
BLOCKED_MAIN += "sys.exit(main(sys.argv[1:]))"


def dynalloc_without(module, *args):
    """`dynalloc ARGS` in a child interpreter where importing `module` fails."""
    code = BLOCKED_MAIN.format(module=module)
    command = [sys.executable, "-c", code, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)


def assert_names_extra(result, command, extra):
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"dynalloc {command}: error: needs "), line
    assert f'install the "{extra}" extra (pip install ".[{extra}]"' in line, line


def test_every_module_is_in_the_extra_it_is_mapped_to():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    for module, extra in EXTRAS.items():
        names = [requirement.split(";")[0] for requirement in extras[extra]]
        assert any(name.startswith(module) for name in names), (module, extra, names)


def test_train_without_the_train_extra(tmp_path):
    pytest.importorskip("pandas")  # this is the workflow env...
    with pytest.raises(ImportError):  # ...which lacks the training stack
        __import__("mxnet")
    data = tmp_path / "data"
    staged = dynalloc("stage", "--source", "synthetic", "--shape", "1,4,4", "--out", data)
    assert staged.returncode == 0, staged.stderr
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"dataset": str(data), "model": "mlp", "global_batch": 8}))
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run")
    assert_names_extra(result, "train", "train")
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("pandas", "summarize --run-dir run --out summary.json"),
        ("pandas", "summarize --help"),  # the module is imported for its arguments
        ("pandas", "replay --run-dir run"),
        ("matplotlib", "compare --summaries s.json --runs run --tables-dir t --plots-dir p"),
    ],
)
def test_analysis_without_the_analysis_extra(tmp_path, module, args):
    result = dynalloc_without(module, *args.split())
    assert_names_extra(result, args.split()[0], "analysis")
    assert f"needs {module}," in result.stderr


def test_a_module_no_extra_installs_keeps_its_traceback():
    # PyYAML is a base dependency: without it the install is broken, not missing an extra.
    result = dynalloc_without("yaml", "run-config", "--help")
    assert result.returncode == 1
    assert "ModuleNotFoundError" in result.stderr and "yaml" in result.stderr
    assert missing_extra(ModuleNotFoundError("No module named 'yaml'", name="yaml")) is None

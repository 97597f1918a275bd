"""The plugin's folders are its boundaries (DESIGN.md): every import of every module, read from
its source (those inside functions too), runs from a folder to a lower one, never the reverse;
`runtime` and `analysis` never import each other; what a folder may import from outside the
plugin follows the environments it must run in."""

import ast
import sys
from pathlib import Path

import dynalloc
import pytest

PACKAGE = Path(dynalloc.__file__).parent
# Lower levels first: a module may import the plugin's modules of its own level or below.
LEVELS = {
    "base": 0,  # the package's own modules (errors, fsutil, rundir, ...): both envs import them
    "core": 1,
    "experiment": 2,
    "data": 3,
    "runtime": 4,
    "analysis": 4,
    "cli": 5,
}
# Outside the plugin and the standard library, the only packages a folder may import.
ALLOWED = {
    "base": {"numpy", "yaml"},
    "core": {"numpy"},
    "experiment": {"numpy", "yaml"},
    "data": {"numpy", "mxnet", "sklearn", "cv2"},
    "runtime": {"numpy", "yaml", "mxnet", "mpi4py"},
    "analysis": {"numpy", "yaml", "pandas", "matplotlib"},
    "cli": set(),
}


def folder(module_path):
    """The boundary a module of the plugin belongs to."""
    parts = module_path.relative_to(PACKAGE).parts
    if len(parts) > 1:
        return parts[0]
    return "cli" if parts[0] == "cli.py" else "base"


def imports(path):
    """Every module name `path` imports, with its line number."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == "dynalloc":  # from dynalloc import rundir
                yield from ((f"dynalloc.{alias.name}", node.lineno) for alias in node.names)
            else:
                yield node.module, node.lineno


def target(name):
    """The boundary an imported `dynalloc...` name lies in."""
    parts = name.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "cli" if parts[1:2] == ["cli"] else "base"


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_lies_in_a_known_folder():
    assert {folder(path) for path in MODULES} == set(LEVELS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_respect_the_boundaries(path):
    mine = folder(path)
    wrong = []
    for name, line in imports(path):
        top = name.split(".")[0]
        if top == "dynalloc":
            theirs = target(name)
            crossing = {mine, theirs} == {"runtime", "analysis"}
            if crossing or LEVELS[theirs] > LEVELS[mine]:
                wrong.append(f"line {line}: {mine} imports {name} ({theirs})")
        elif top not in sys.stdlib_module_names and top not in ALLOWED[mine]:
            wrong.append(f"line {line}: {mine} imports {name}, outside {sorted(ALLOWED[mine])}")
    assert not wrong, wrong


def test_the_check_sees_a_wrong_import(tmp_path):
    """The walk reads imports inside functions too, and a crossing import is caught."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from dynalloc.analysis.runs import load_run\n")
    assert list(imports(module)) == [("dynalloc.analysis.runs", 2)]
    assert target("dynalloc.analysis.runs") == "analysis"

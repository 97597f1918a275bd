"""The plugin's folders are its boundaries (DESIGN.md): every import of every module, read from
its source (those inside functions too), runs from a folder to a lower one, never the reverse;
`runtime` and `analysis` never import each other; inside `runtime`, the adapters (`mxnet`,
`torch`) import `common` and never each other, and `common` imports no adapter; no module imports
itself through others; what a folder may import from outside the plugin follows the environments
it must run in."""

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
    "face": 5,  # dynalloc.mxnet and dynalloc.torch, the frameworks' one-import faces
}
FACES = {"mxnet.py", "torch.py"}
# runtime's rooms: a room may import its own modules and those of the rooms listed for it.
ROOMS = {
    "common": set(),
    "mxnet": {"common"},
    "torch": {"common"},
    "": {"common", "mxnet", "torch"},
}
# Outside the plugin and the standard library, the only packages a folder may import.
ALLOWED = {
    "base": {"numpy", "yaml"},
    "core": {"numpy"},
    "experiment": {"numpy", "yaml"},
    "data": {"numpy", "mxnet", "sklearn", "cv2"},
    "runtime": {"numpy", "yaml", "mxnet", "mpi4py", "torch"},
    "analysis": {"numpy", "yaml", "pandas", "matplotlib"},
    "cli": set(),
    "face": set(),
}


def folder(module_path):
    """The boundary a module of the plugin belongs to."""
    parts = module_path.relative_to(PACKAGE).parts
    if len(parts) > 1:
        return parts[0]
    if parts[0] in FACES:
        return "face"
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
RUNTIME = PACKAGE / "runtime"


def room(name):
    """The room of runtime a dotted `dynalloc.runtime...` name lies in ('' for runtime's own
    modules, the older paths of the faces)."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and (RUNTIME / parts[2]).is_dir() else ""


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


def module_name(path):
    return "dynalloc." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


@pytest.mark.parametrize(
    "path", sorted(RUNTIME.rglob("*.py")), ids=lambda p: str(p.relative_to(RUNTIME))
)
def test_runtime_rooms_import_common_and_never_each_other(path):
    mine = room(module_name(path).removesuffix(".__init__"))
    wrong = [
        f"line {line}: runtime/{mine or '.'} imports {name}"
        for name, line in imports(path)
        if name.startswith("dynalloc.runtime.") and room(name) not in ROOMS[mine] | {mine}
    ]
    assert not wrong, wrong


def test_the_room_check_sees_a_wrong_import():
    assert room("dynalloc.runtime.mxnet.gluon") == "mxnet"
    assert room("dynalloc.runtime.common.recorder") == "common"
    assert room("dynalloc.runtime.common") == "common"
    assert room("dynalloc.runtime.gluon") == ""
    assert "mxnet" not in ROOMS["torch"] and "torch" not in ROOMS["mxnet"]
    assert not ROOMS["common"]


def import_graph():
    """Module -> the plugin's modules it imports by name (a package's `__init__` counts as the
    package; importing a module is not read as importing its parents)."""
    by_name = {module_name(path).removesuffix(".__init__"): path for path in MODULES}
    return {
        name: {other for other in imported_modules(path) if other in by_name and other != name}
        for name, path in by_name.items()
    }


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_the_package():
    assert cycles(import_graph()) == []


def test_the_circle_check_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def imported_modules(path):
    """What `path` imports, `from package import module` read as the module too."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def reachable(start):
    """The plugin's modules that `start` (a dotted name) imports, directly or through others."""
    by_name = {module_name(path): path for path in MODULES}
    by_name |= {name.removesuffix(".__init__"): path for name, path in by_name.items()}
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo += list(imported_modules(by_name[name]))
    return seen


def test_the_two_frameworks_never_load_each_other():
    """The PyTorch environment has no MXNet and the MXNet one no PyTorch: nothing the torch
    adapter imports, however indirectly, imports mxnet, and nothing outside it imports torch."""
    torch_side = reachable("dynalloc.runtime.torch")
    assert {"dynalloc.runtime.torch.batch", "dynalloc.runtime.common.allocation"} <= torch_side
    wrong = []
    for path in MODULES:
        name = module_name(path)
        tops = {imported.split(".")[0] for imported, _ in imports(path)}
        if name in torch_side and "mxnet" in tops:
            wrong.append(f"{name} imports mxnet and the torch adapter imports it")
        if not name.startswith("dynalloc.runtime.torch") and "torch" in tops:
            wrong.append(f"{name} imports torch outside runtime/torch")
    assert not wrong, wrong


def test_every_test_module_has_a_name_of_its_own():
    """pytest imports test modules by their base name (its folders are no packages): two of one
    name in one session stop its collection."""
    tests = Path(__file__).parents[1]
    names = [path.name for path in tests.rglob("*.py") if path.name != "conftest.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []

"""A user's network factory (`model: {factory: "package.module:function", args: {...}}`),
imported and called the same way whichever framework the run trains with: every failure is one
DynallocError naming the key, raised before the run directory is touched. No framework here:
each framework's models module says what a network must be."""

import importlib
import inspect
import sys

from dynalloc.errors import DynallocError


def factory(path, classes, input_shape, args, python_path, kind, what):
    """A function that calls `path`'s function with `classes`, `input_shape` and `args` and
    returns its network, which must be an instance of `kind` (`what` names it in the error).
    `python_path` lists directories put first on sys.path before the module is imported."""
    module_name, function_name = path.split(":")
    for folder in reversed(list(python_path)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - any failure of the user's module
        raise DynallocError(
            f"model.factory: module {module_name!r} does not import: {one_line(error)}"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise DynallocError(
            f"model.factory: module {module_name!r} ({getattr(module, '__file__', '?')}) "
            f"has no function {function_name!r}"
        )
    kwargs = {"classes": classes, "input_shape": input_shape, **args}
    try:
        inspect.signature(function).bind(**kwargs)
    except TypeError as error:
        raise DynallocError(f"model.args: {path} rejects {kwargs}: {error}") from None
    except ValueError:
        pass  # no signature to read: the call itself will tell

    def make():
        try:
            net = function(**kwargs)
        except Exception as error:  # noqa: BLE001 - any failure of the user's function
            key = "model.args" if args else "model.factory"
            raise DynallocError(f"{key}: {path}(**{kwargs}) failed: {one_line(error)}") from None
        if not isinstance(net, kind):
            raise DynallocError(f"model.factory: {path} returned {type(net).__name__}, not {what}")
        return net

    return make


def one_line(error):
    """An exception as one line: its type and its message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__

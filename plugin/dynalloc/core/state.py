"""An object's state as plain data, and back: what a checkpoint holds of a policy.

A policy (with its cost models, runs of observations and tests) is plain Python objects over
numbers and numpy arrays. `export` turns one into a tree of JSON values and arrays, naming each
object's class; `restore` assigns such a tree onto an object of the same classes built afresh
(the policy the resumed run makes from its config). Nothing is built from the file's names: a
tree whose classes or attributes differ from the fresh object's is another version's state,
which `same_layout` tells in advance, and the shares then start afresh. A pickle would rebuild
any object it names, running its code: whoever can write a run directory on a shared
filesystem could run code in the next job that resumes from it.
"""

import numpy as np

OBJECT, ITEMS, TUPLE = "__object__", "__items__", "__tuple__"


def export(value):
    """`value` as a tree of dicts, lists, strings, numbers, None and numpy arrays."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [export(item) for item in value]
    if isinstance(value, tuple):
        return {TUPLE: [export(item) for item in value]}
    if isinstance(value, dict):
        return {ITEMS: [[export(k), export(v)] for k, v in value.items()]}
    if hasattr(value, "__dict__"):
        attributes = {name: export(item) for name, item in vars(value).items()}
        return {OBJECT: type(value).__qualname__, "attributes": attributes}
    raise TypeError(f"no plain state for a {type(value).__qualname__}")


def same_layout(obj, tree):
    """Whether `tree` is a state of `obj`'s classes with `obj`'s attributes, all the way down."""
    return _layout(export(obj)) == _layout(tree)


def _layout(tree):
    if isinstance(tree, dict) and OBJECT in tree:
        names = sorted(tree["attributes"])
        return tree[OBJECT], tuple((n, _layout(tree["attributes"][n])) for n in names)
    return None


def restore(obj, tree):
    """Assign the state `tree` (of `export`) onto `obj`, an object of the same layout: its own
    objects keep their identity and take their attributes' values."""
    for name, value in tree["attributes"].items():
        current = getattr(obj, name)
        if isinstance(value, dict) and OBJECT in value:
            restore(current, value)
        else:
            setattr(obj, name, plain(value))


def plain(tree):
    """The value of a tree without objects: lists, tuples, dicts, numbers and arrays."""
    if isinstance(tree, list):
        return [plain(item) for item in tree]
    if isinstance(tree, dict) and TUPLE in tree:
        return tuple(plain(item) for item in tree[TUPLE])
    if isinstance(tree, dict) and ITEMS in tree:
        return {_key(plain(k)): plain(v) for k, v in tree[ITEMS]}
    if isinstance(tree, dict):
        raise ValueError("an object's state where a plain value belongs")
    return tree


def _key(key):
    return tuple(key) if isinstance(key, list) else key

"""What the tests of the run config share: a raw config on a dataset `staged`, and `resolve`
expected to refuse one with a DynallocError naming its key."""

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import resolve

DATASET = "staged"


def base(**overrides):
    raw = {"dataset": DATASET}
    raw.update(overrides)
    return raw


def fails(raw, *fragments, ranks=2):
    """Resolve `raw`; it must raise DynallocError whose message contains every fragment."""
    with pytest.raises(DynallocError) as caught:
        resolve(raw, ranks)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message

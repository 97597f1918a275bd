"""`dynalloc.core.runs`: per-rank runs of observations in one growing array."""

import numpy as np
from dynalloc.core.runs import Runs


def observation(ranks, value):
    return np.full(ranks, value), np.full(ranks, 10.0 * value), np.full(ranks, -value)


def test_appends_go_to_the_masked_ranks_runs_in_order_and_clear_empties_them():
    runs = Runs(3, capacity=2)
    for value, mask in [(1.0, [1, 0, 1]), (2.0, [1, 1, 0]), (3.0, [1, 0, 0]), (4.0, [1, 1, 1])]:
        runs.append(np.array(mask, dtype=bool), *observation(3, value))
    assert runs.length.tolist() == [4, 2, 2]  # rank 0's run outgrew the capacity of 2
    assert runs.share[0, :4].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert runs.share[1, :2].tolist() == [2.0, 4.0]
    assert runs.seconds[2, :2].tolist() == [10.0, 40.0]
    assert runs.first_error().tolist() == [-1.0, -2.0, -1.0]
    assert runs.last_error().tolist() == [-4.0, -4.0, -4.0]
    runs.clear(np.array([True, False, False]))
    runs.append(np.array([True, False, False]), *observation(3, 5.0))
    assert runs.length.tolist() == [1, 2, 2]
    assert runs.first_error()[0] == runs.last_error()[0] == -5.0
    assert runs.share[1, :2].tolist() == [2.0, 4.0]  # the others' runs are untouched

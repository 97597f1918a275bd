"""The stall bound: derived from the measured intervals, never under stall_timeout, shorter once a
stop was requested (the watch itself runs on real ranks in tests/mpi/test_stall_and_lock.py)."""

import pytest
from dynalloc.runtime.common.stall import (
    FACTOR,
    STOP_FACTOR,
    STOP_FLOOR_S,
    host_addresses,
    stall_bound,
)


def test_nothing_is_bounded_before_the_first_iteration():
    assert stall_bound(60, None) is None
    assert stall_bound(60, None, stopping=True) is None


@pytest.mark.parametrize(("longest", "bound"), [(0.5, 60), (5.9, 60), (6.0, 60), (30.0, 300)])
def test_the_bound_is_stall_timeout_or_ten_times_the_longest_interval(longest, bound):
    assert FACTOR == 10
    assert stall_bound(60, longest) == pytest.approx(bound)


@pytest.mark.parametrize(
    ("timeout", "longest", "bound"),
    [
        (60, 0.1, STOP_FLOOR_S),
        (60, 4.0, STOP_FACTOR * 4.0),
        (60, 30.0, STOP_FACTOR * 30.0),
        (2, 0.1, 2),  # never above the usual bound
    ],
)
def test_a_requested_stop_that_no_iteration_follows_is_bounded_sooner(timeout, longest, bound):
    assert stall_bound(timeout, longest, stopping=True) == pytest.approx(bound)


def test_the_host_addresses_end_with_loopback():
    addresses = host_addresses()
    assert addresses[-1] == "127.0.0.1"
    assert all(len(address.split(".")) == 4 for address in addresses)

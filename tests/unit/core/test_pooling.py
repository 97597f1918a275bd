"""Iterations shorter than `pool_s` pooled into one observation (`Policy.update`): what a policy
sees of them, where a pool ends, its state in a checkpoint, and why (fewer moves under noise)."""

import numpy as np
import pytest
from dynalloc.core.policies import make_policy
from dynalloc.core.policy import STEADY_POOLS, Policy
from dynalloc.core.simulate import simulate
from dynalloc.core.state import export, restore


class Seen(Policy):
    """Keeps the equal split and notes each observation `_next` is given."""

    name = "seen"

    def __init__(self, ranks=2, global_batch=64, pool_s=0.02):
        super().__init__(ranks, global_batch, pool_s=pool_s)
        self.seen = []

    def _next(self, shares, seconds, iteration, epoch):
        self.seen.append((shares.tolist(), seconds.tolist(), iteration, epoch))
        return self.shares


def test_short_iterations_are_one_observation_of_their_mean_times():
    policy = Seen()
    policy.update([32, 32], [0.004, 0.006], 1, 0)  # the first (the warm-up) alone
    for iteration in range(2, 6):  # the slowest rank's 6 ms, 4 times: 24 ms >= 20 ms
        policy.update([32, 32], [0.003, 0.006], iteration, 0)
    assert [s[2] for s in policy.seen] == [1, 5]
    shares, seconds, _, _ = policy.seen[1]
    assert shares == [32, 32] and seconds == pytest.approx([0.003, 0.006])


def test_an_iteration_of_pool_s_or_longer_is_observed_alone_as_without_pooling():
    pooled, alone = Seen(pool_s=0.02), Seen(pool_s=0)
    for iteration in range(1, 5):
        for policy in (pooled, alone):
            policy.update([32, 32], [0.001, 0.02 + iteration * 1e-3], iteration, 0)
    assert pooled.seen == alone.seen and len(alone.seen) == 4


def test_an_epochs_end_ends_the_pool_with_it():
    policy = Seen()
    policy.update([32, 32], [0.001, 0.001], 1, 0)
    policy.update([32, 32], [0.001, 0.002], 2, 0)
    policy.update([32, 32], [0.001, 0.004], 3, 1)  # iteration 2, the epoch's last
    assert policy.seen[1] == ([32, 32], pytest.approx([0.001, 0.003]), 3, 1)
    assert policy.pool is None


def test_a_smaller_last_batch_ends_the_pool_before_it():
    policy = Seen()
    policy.update([32, 32], [0.001, 0.001], 1, 0)
    policy.update([32, 32], [0.001, 0.002], 2, 0)
    policy.update([10, 7], [0.0005, 0.0009], 3, 1)  # the epoch's smaller last batch
    assert [(s[0], s[2], s[3]) for s in policy.seen] == [
        ([32, 32], 1, 0), ([32, 32], 2, 0), ([10, 7], 3, 1)]  # fmt: skip


def test_arrays_pool_as_the_same_numbers_in_lists():
    """A simulator's numpy arrays go through their own `tolist` (`policy.numbers`), a training
    loop's lists item by item: the observations are the same, to the last bit."""
    arrays, lists = Seen(), Seen()
    rng = np.random.default_rng(0)
    for iteration in range(1, 40):
        seconds = rng.uniform(0.001, 0.008, 2)
        arrays.update(np.array([32.0, 32.0]), seconds, iteration, iteration // 15)
        lists.update([32, 32], seconds.tolist(), iteration, iteration // 15)
    assert arrays.seen == lists.seen and len(lists.seen) > 3
    assert all(type(x) is int for x in arrays.pool[0])
    assert all(type(x) is float for x in arrays.pool[1])


@pytest.mark.parametrize("shares", [np.array([[32, 32]]), np.array([32.0, 32.0, 0.0])])
def test_shares_of_another_shape_are_named(shares):
    with pytest.raises(ValueError, match="expected 2 shares and times"):
        Seen().update(shares, np.array([0.001, 0.002]), 1, 0)


def test_unusable_times_leave_the_pool_as_it_was():
    policy = Seen()
    policy.update([32, 32], [0.001, 0.001], 1, 0)
    policy.update([32, 32], [0.001, 0.002], 2, 0)
    with pytest.warns(RuntimeWarning, match="keeping the previous shares"):
        policy.update([32, 32], [0.001, float("nan")], 3, 0)
    assert policy.pool[2] == 1 and policy.pool[1] == [0.001, 0.002]


class Mover(Seen):
    """Moves a sample from rank 1 to rank 0 at the observations numbered in `moving_at`."""

    def __init__(self, moving_at):
        super().__init__()
        self.moving_at = moving_at

    def _next(self, shares, seconds, iteration, epoch):
        super()._next(shares, seconds, iteration, epoch)
        return self.shares + [1, -1] if len(self.seen) in self.moving_at else self.shares


SLOWEST_S = 2**-9  # the slowest rank's 1.95 ms, exact in binary: pools end where sums say


def pool_lengths(policy, iterations):
    """Iterations in each of `policy`'s pools over `iterations` at its shares, the warm-up
    (the first, alone) left out."""
    for iteration in range(1, iterations + 1):
        policy.update(policy.shares, [0.001, SLOWEST_S], iteration, 0)
    return np.diff([seen[2] for seen in policy.seen]).tolist()


def test_a_pool_after_one_that_left_the_shares_is_steady_pools_times_as_long():
    assert STEADY_POOLS == 2  # 20 ms of the slowest rank's compute, then 40 ms
    assert pool_lengths(Seen(), 1 + 11 + 3 * 21) == [11, 21, 21, 21]


def test_a_move_brings_the_short_pools_back():
    assert pool_lengths(Mover(moving_at={3}), 1 + 11 + 21 + 11 + 2 * 21) == [11, 21, 11, 21, 21]


def test_an_iteration_of_pool_s_or_longer_ends_a_steady_pool_with_it():
    policy = Seen()
    pool_lengths(policy, 1 + 11 + 5)  # 5 iterations into a 40 ms pool
    policy.update([32, 32], [0.001, 0.02], 18, 0)
    _, seconds, iteration, _ = policy.seen[-1]
    assert iteration == 18 and seconds[1] == pytest.approx((5 * SLOWEST_S + 0.02) / 6)


@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), "0.02", True])
def test_a_bad_pool_s_is_named(bad):
    with pytest.raises(ValueError, match="pool_s must be a number of seconds >= 0"):
        make_policy({"name": "adaptive", "pool_s": bad}, 2, 64)


def test_a_pool_under_way_resumes_from_its_plain_state_exactly():
    """A checkpoint taken in the middle of a pool: the resumed policy finishes that pool and
    chooses the very shares the uninterrupted one does."""
    rng = np.random.default_rng(3)
    times = [rng.uniform(0.8, 1.2, 2) * [0.002, 0.006] for _ in range(60)]
    whole, resumed = make_policy("adaptive", 2, 64), make_policy("adaptive", 2, 64)
    cut = 0
    while cut < 20 or whole.pool is None:
        cut += 1
        whole.update(whole.shares, times[cut - 1], cut, 0)
    restore(resumed, export(whole))
    for iteration, seconds in enumerate(times[cut:], cut + 1):
        assert whole.update(whole.shares, seconds, iteration, 0).tolist() == resumed.update(
            resumed.shares, seconds, iteration, 0).tolist()  # fmt: skip
    assert whole.shares.tolist() != [32, 32]  # 1:3 was found: the test saw the moves


def moves(trace):
    return int((np.diff(trace.shares, axis=0) != 0).any(axis=1).sum())


def test_pooling_keeps_one_millisecond_iterations_from_chasing_their_noise():
    """One rank three times slower, 1-2 ms iterations under +-30% jitter: without pooling the
    split follows each iteration's noise around the balance (a new input shape each time);
    pooled, the means of a dozen iterations move it a tenth as often, as fast overall."""
    ranks = dict(intercepts=[2e-4] * 2, slopes=[2.5e-5, 7.5e-5], iterations=400, noise=0.3)
    alone = [simulate(make_policy({"name": "adaptive", "pool_s": 0}, 2, 64), seed=seed,
                      **ranks) for seed in range(5)]  # fmt: skip
    pooled = [simulate(make_policy("adaptive", 2, 64), seed=seed, **ranks) for seed in range(5)]
    assert sum(map(moves, pooled)) * 5 <= sum(map(moves, alone))
    assert sum(map(elapsed, pooled)) <= sum(map(elapsed, alone))
    assert all(abs(trace.shares[-1][0] - 48) <= 2 for trace in pooled)


def elapsed(trace):
    return trace.true_times.max(axis=1).sum()

"""`dynalloc.core.partition.GlobalBatchSampler`: every sample of an epoch exactly once, whatever the
shares of each iteration are, in contiguous rank-ordered pieces of a per-(seed, epoch) permutation.
"""

import doctest

import numpy as np
import pytest
from dynalloc.core import partition
from dynalloc.core.partition import GlobalBatchSampler
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=120, deadline=None)


def random_shares(draw, ranks, total, least):
    """`ranks` integers >= `least` summing to `total` (requires total >= ranks * least)."""
    spare = total - ranks * least
    cuts = sorted(draw(st.lists(st.integers(0, spare), min_size=ranks - 1, max_size=ranks - 1)))
    parts = np.diff([0, *cuts, spare])
    return [int(least + p) for p in parts]


@st.composite
def epochs(draw):
    """A sampler's arguments and one share vector per iteration, drawn afresh per iteration."""
    ranks = draw(st.integers(1, 8))
    min_share = draw(st.integers(0, 3))
    least = max(min_share, 1)  # positive shares; zero shares have a test of their own below
    global_batch = draw(st.integers(ranks * least, 64))
    dataset_size = draw(st.integers(global_batch, 6 * global_batch + 7))
    drop_last = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    epoch = draw(st.integers(0, 1000))
    full = dataset_size // global_batch
    per_iteration = [random_shares(draw, ranks, global_batch, least) for _ in range(full + 1)]
    return dataset_size, global_batch, ranks, min_share, drop_last, seed, epoch, per_iteration


@FAST
@given(epochs())
def test_an_epoch_covers_every_kept_sample_exactly_once(case):
    dataset_size, global_batch, ranks, min_share, drop_last, seed, epoch, per_iteration = case
    sampler = GlobalBatchSampler(dataset_size, global_batch, seed, drop_last, min_share, ranks)
    full, remainder = divmod(dataset_size, global_batch)
    kept_remainder = not drop_last and remainder > 0 and remainder >= ranks * min_share
    assert sampler.batches_per_epoch == full + int(kept_remainder)

    perm = sampler.permutation(epoch)
    assert sorted(perm.tolist()) == list(range(dataset_size))
    taken = []
    for k in range(sampler.batches_per_epoch):
        size = sampler.batch_size(k)
        assert size == (global_batch if k < full else remainder)
        shares = sampler.shares_for(k, per_iteration[k])
        assert shares.dtype == np.int64
        assert int(shares.sum()) == size
        assert shares.min() >= min_share
        if k < full:
            assert shares.tolist() == per_iteration[k]
        pieces = [sampler.rank_indices(epoch, k, shares, r) for r in range(ranks)]
        assert [len(p) for p in pieces] == shares.tolist()
        # Contiguous pieces in rank order: together they are exactly the batch's slice.
        start = k * global_batch
        assert np.concatenate(pieces).tolist() == perm[start : start + size].tolist()
        # Passing the permutation gives the same pieces.
        assert all(
            np.array_equal(p, sampler.rank_indices(epoch, k, shares, r, permutation=perm))
            for r, p in enumerate(pieces)
        )
        taken.extend(np.concatenate(pieces).tolist())

    assert len(taken) == len(set(taken))
    if kept_remainder or remainder == 0:
        assert sorted(taken) == list(range(dataset_size))
    else:
        assert len(taken) == full * global_batch
        dropped = set(range(dataset_size)) - set(taken)
        assert dropped == set(perm[full * global_batch :].tolist())
        assert len(dropped) == remainder


@FAST
@given(
    st.integers(20, 500),
    st.integers(1, 20),
    st.integers(0, 2**32 - 2),
    st.integers(0, 10_000),
)
def test_permutation_depends_on_seed_and_epoch_only(dataset_size, global_batch, seed, epoch):
    sampler = GlobalBatchSampler(dataset_size, global_batch, seed)
    perm = sampler.permutation(epoch)
    # Same (seed, epoch): same permutation, from this or any other sampler of the dataset.
    assert np.array_equal(perm, sampler.permutation(epoch))
    other = GlobalBatchSampler(dataset_size, global_batch, seed, drop_last=True, ranks=3)
    assert np.array_equal(perm, other.permutation(epoch))
    # Another epoch or seed: another permutation (equal by chance with probability 1/20!).
    assert not np.array_equal(perm, sampler.permutation(epoch + 1))
    assert not np.array_equal(
        perm, GlobalBatchSampler(dataset_size, 1, seed + 1).permutation(epoch)
    )
    # Distinct (seed, epoch) pairs, not just distinct sums or either component alone.
    assert not np.array_equal(
        GlobalBatchSampler(dataset_size, 1, seed + 1).permutation(epoch),
        sampler.permutation(epoch + 1),
    )


def test_permutation_is_reproducible_across_instances():
    a = GlobalBatchSampler(1000, 32, seed=7).permutation(3)
    b = GlobalBatchSampler(1000, 32, seed=7).permutation(3)
    assert a.tolist() == b.tolist()
    assert a.tolist() != list(range(1000))
    epochs_seen = {tuple(GlobalBatchSampler(1000, 32, seed=7).permutation(e)) for e in range(5)}
    seeds_seen = {tuple(GlobalBatchSampler(1000, 32, seed=s).permutation(0)) for s in range(5)}
    assert len(epochs_seen) == 5
    assert len(seeds_seen) == 5
    grid = {
        tuple(GlobalBatchSampler(1000, 32, seed=s).permutation(e))
        for s in range(4)
        for e in range(4)
    }
    assert len(grid) == 16


def test_doctest_of_the_module():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(partition, globs={"GlobalBatchSampler": GlobalBatchSampler})
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 3
    assert result.failed == 0


def test_docstring_example_directly():
    sampler = GlobalBatchSampler(dataset_size=10, global_batch=4, seed=0)
    assert sampler.batches_per_epoch == 3
    assert [len(sampler.rank_indices(0, k, [3, 1], 0)) for k in range(2)] == [3, 3]
    assert [len(sampler.rank_indices(0, k, [3, 1], 1)) for k in range(2)] == [1, 1]
    # The last batch holds the 2 remaining samples.
    assert sampler.batch_size(2) == 2
    assert sampler.shares_for(2, [3, 1]).tolist() == [1, 1]


@pytest.mark.parametrize(
    ("dataset_size", "global_batch", "drop_last", "min_share", "ranks", "batches"),
    [
        (10, 4, False, 1, 1, 3),
        (10, 4, True, 1, 1, 2),
        (12, 4, False, 1, 1, 3),
        (12, 4, True, 1, 1, 3),
        (4, 4, False, 1, 4, 1),
        (10, 4, False, 1, 2, 3),  # remainder 2 = ranks x min_share: kept
        (10, 4, False, 1, 3, 2),  # remainder 2 < 3 ranks: dropped
        (11, 4, False, 2, 2, 2),  # remainder 3 < 2 x 2: dropped
        (11, 4, False, 0, 8, 3),  # min_share 0: any non-empty remainder is kept
    ],
)
def test_batches_per_epoch(dataset_size, global_batch, drop_last, min_share, ranks, batches):
    sampler = GlobalBatchSampler(dataset_size, global_batch, 0, drop_last, min_share, ranks)
    assert sampler.batches_per_epoch == batches


@pytest.mark.parametrize(
    ("shares", "global_batch", "size", "min_share", "expected"),
    [
        ([30, 10], 40, 20, 1, [15, 5]),
        ([20, 20], 40, 10, 1, [5, 5]),
        ([21, 20], 41, 3, 1, [2, 1]),
        ([38, 1, 1], 40, 10, 2, [6, 2, 2]),
        ([38, 1, 1], 40, 3, 1, [1, 1, 1]),
        ([1, 1, 1, 97], 100, 8, 1, [1, 1, 1, 5]),
    ],
)
def test_shares_for_the_last_batch_rescale(shares, global_batch, size, min_share, expected):
    sampler = GlobalBatchSampler(
        global_batch + size, global_batch, 0, min_share=min_share, ranks=len(shares)
    )
    assert sampler.batches_per_epoch == 2
    assert sampler.shares_for(0, shares).tolist() == shares
    rescaled = sampler.shares_for(1, shares)
    assert rescaled.dtype == np.int64
    assert rescaled.tolist() == expected


@FAST
@given(st.data())
def test_shares_for_rescaled_shares_stay_roughly_proportional(data):
    ranks = data.draw(st.integers(1, 8))
    min_share = data.draw(st.integers(0, 3))
    least = max(min_share, 1)
    global_batch = data.draw(st.integers(ranks * least + 1, 500))
    remainder = data.draw(st.integers(max(ranks * min_share, 1), global_batch - 1))
    shares = random_shares(data.draw, ranks, global_batch, least)
    sampler = GlobalBatchSampler(
        global_batch * 3 + remainder, global_batch, 1, False, min_share, ranks
    )
    rescaled = sampler.shares_for(3, shares)
    assert int(rescaled.sum()) == remainder
    assert rescaled.min() >= min_share
    if min_share == 0:
        exact = np.asarray(shares) * remainder / global_batch
        assert np.all(rescaled > exact - 1 - 1e-9)
        assert np.all(rescaled < exact + ranks)


@pytest.mark.parametrize(("dataset_size", "global_batch"), [(9, 10), (0, 1), (1, 512)])
def test_dataset_smaller_than_one_global_batch_raises(dataset_size, global_batch):
    with pytest.raises(ValueError, match="smaller than one global batch"):
        GlobalBatchSampler(dataset_size, global_batch, seed=0)


def test_shares_for_accepts_zero_shares_when_min_share_is_zero():
    sampler = GlobalBatchSampler(10, 4, seed=0, min_share=0, ranks=2)
    rescaled = sampler.shares_for(2, [0, 4])
    assert rescaled.tolist() == [0, 2]


# Per-rank minimum shares: a last batch is kept only when it gives every rank its own minimum.


@pytest.mark.parametrize(
    ("dataset_size", "global_batch", "min_share", "batches"),
    [
        (11, 4, [1, 2], 3),  # remainder 3 = 1 + 2: kept
        (11, 4, [2, 2], 2),  # remainder 3 < 2 + 2: dropped
        (10, 4, [0, 3], 2),  # remainder 2 < 0 + 3: dropped
        (9, 4, [0, 0], 3),  # no minimum: any non-empty remainder is kept
        (11, 4, [1, 1], 3),  # the same as min_share 1
    ],
)
def test_batches_per_epoch_with_per_rank_min_shares(dataset_size, global_batch, min_share, batches):
    sampler = GlobalBatchSampler(dataset_size, global_batch, 0, False, min_share, len(min_share))
    assert sampler.batches_per_epoch == batches


def test_the_last_batch_gives_each_rank_its_own_min_share():
    sampler = GlobalBatchSampler(60, 40, 0, min_share=[1, 8], ranks=2)
    assert sampler.batches_per_epoch == 2
    assert sampler.shares_for(1, [30, 10]).tolist() == [12, 8]  # proportionally [15, 5]


def test_per_rank_min_shares_of_the_wrong_length_are_named():
    with pytest.raises(ValueError, match="min_share has 3 entries for 2 ranks"):
        GlobalBatchSampler(10, 4, 0, min_share=[1, 1, 1], ranks=2)


@FAST
@given(st.data())
def test_a_rescaled_last_batch_keeps_per_rank_bounds(data):
    """Any shares of B within per-rank bounds, any kept remainder: the last batch's shares give
    every rank its own minimum and none more than its share of B, so no cap can bind."""
    ranks = data.draw(st.integers(1, 8))
    lows = data.draw(st.lists(st.integers(0, 5), min_size=ranks, max_size=ranks))
    global_batch = data.draw(st.integers(sum(max(low, 1) for low in lows) + 1, 500))
    remainder = data.draw(st.integers(max(sum(lows), 1), global_batch - 1))
    shares = [
        max(low, 1) + extra
        for low, extra in zip(
            lows,
            random_shares(data.draw, ranks, global_batch - sum(max(low, 1) for low in lows), 0),
            strict=True,
        )
    ]
    sampler = GlobalBatchSampler(global_batch * 2 + remainder, global_batch, 1, False, lows, ranks)
    assert sampler.batches_per_epoch == 3
    rescaled = sampler.shares_for(2, shares)
    assert int(rescaled.sum()) == remainder
    assert np.all(rescaled >= lows)
    assert np.all(rescaled <= shares)

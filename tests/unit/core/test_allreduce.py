"""`dynalloc.core.allreduce`: the Allreduce cost formulas against hand-computed cases, and the
regimes they predict (latency-bound short messages, bandwidth-bound long ones)."""

import pytest
from dynalloc.core.allreduce import ALGORITHMS, allreduce_seconds

ALPHA, BETA, GAMMA, N = 1e-6, 1e-9, 2e-9, 1000


@pytest.mark.parametrize(
    "algorithm, ranks, expected",
    [
        # 2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
        ("ring", 4, 6 * ALPHA + 1.5 * N * BETA + 0.75 * N * GAMMA),
        ("ring", 2, 2 * ALPHA + 1.0 * N * BETA + 0.5 * N * GAMMA),
        # 2 ceil(lg p) (alpha + n beta) + ceil(lg p) n gamma; ceil(lg 5) = 3
        ("tree", 5, 6 * (ALPHA + N * BETA) + 3 * N * GAMMA),
        ("tree", 8, 6 * (ALPHA + N * BETA) + 3 * N * GAMMA),
        # lg p (alpha + n beta + n gamma)
        ("recursive_doubling", 8, 3 * (ALPHA + N * BETA + N * GAMMA)),
        # p = 6: 4 ranks run it (2 steps), the 2 others fold in and get the result back
        ("recursive_doubling", 6, 4 * ALPHA + 4 * N * BETA + 3 * N * GAMMA),
        # 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
        ("rabenseifner", 8, 6 * ALPHA + 1.75 * N * BETA + 0.875 * N * GAMMA),
        ("rabenseifner", 5, 4 * ALPHA + 1.5 * N * BETA + 0.75 * N * GAMMA
         + (2 * ALPHA + 2 * N * BETA + N * GAMMA)),
    ],
)  # fmt: skip
def test_formulas_match_hand_computed_cases(algorithm, ranks, expected):
    assert allreduce_seconds(algorithm, ranks, N, ALPHA, BETA, GAMMA) == pytest.approx(expected)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_one_rank_exchanges_nothing(algorithm):
    assert allreduce_seconds(algorithm, 1, 10**9, ALPHA, BETA, GAMMA) == 0.0


def test_short_messages_favour_recursive_doubling_and_long_ones_the_ring():
    """The reason MPICH switches algorithms by message size: lg p latencies against 2 (p-1),
    n lg p bytes against 2 n (p-1)/p."""
    short = {a: allreduce_seconds(a, 64, 8, 5e-6, 1e-10) for a in ALGORITHMS}
    long = {a: allreduce_seconds(a, 64, 10**8, 5e-6, 1e-10) for a in ALGORITHMS}
    assert min(short, key=short.get) == "recursive_doubling"
    assert long["ring"] < long["recursive_doubling"] and long["ring"] < long["tree"]
    # The ring's bandwidth term approaches 2 n beta however many ranks join.
    assert allreduce_seconds("ring", 4096, 10**8, 0.0, 1e-10) == pytest.approx(0.02, rel=1e-3)


def test_bad_algorithm_or_ranks_are_refused():
    with pytest.raises(ValueError, match="unknown Allreduce algorithm 'butterfly'"):
        allreduce_seconds("butterfly", 4, N, ALPHA, BETA)
    with pytest.raises(ValueError, match="at least one rank"):
        allreduce_seconds("ring", 0, N, ALPHA, BETA)

"""What one Allreduce of the gradients costs on a modelled network: the standard formulas.

The cost model is Hockney's as Thakur, Rabenseifner & Gropp use it ("Optimization of collective
communication operations in MPICH", IJHPCA 19(1), 2005): a message of n bytes between two ranks
costs `alpha + n * beta` (latency, seconds per byte), and reducing n bytes costs `n * gamma`.
For p ranks (lg: log base 2):

- `ring`: reduce-scatter then allgather around a ring (Patarasuk & Yuan 2009, the bandwidth-
  optimal one NCCL and Horovod use):
  `2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma`.
- `tree`: a binomial-tree reduce to one rank, then a binomial-tree broadcast (Thakur et al. 2005,
  sections 4.1 and 4.2): `2 ceil(lg p) (alpha + n beta) + ceil(lg p) n gamma`.
- `recursive_doubling`: lg p exchanges of the whole vector, MPICH's choice for short messages
  (section 4.5): `lg p (alpha + n beta + n gamma)`.
- `rabenseifner`: reduce-scatter by recursive halving, then allgather by recursive doubling,
  MPICH's choice for long messages (section 4.5):
  `2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma`.

The last two need a power of two: with p' the largest power of two below p, MPICH first folds the
p - p' extra ranks' vectors into partners (`alpha + n beta + n gamma`) and sends them the result at
the end (`alpha + n beta`), and the p' others run the algorithm (section 4.5).
"""

import math

ALGORITHMS = ("ring", "tree", "recursive_doubling", "rabenseifner")


def allreduce_seconds(algorithm, ranks, nbytes, alpha, beta, gamma=0.0):
    """Seconds one Allreduce of `nbytes` takes on `ranks` ranks under `algorithm` (ALGORITHMS),
    latency `alpha` (s), `beta` seconds per byte sent and `gamma` seconds per byte reduced.

    >>> allreduce_seconds("ring", 4, 1000, 1e-6, 1e-9)  # 6 alpha + 1.5 n beta
    7.5e-06
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"unknown Allreduce algorithm {algorithm!r}; one of {', '.join(ALGORITHMS)}"
        )
    if ranks < 1:
        raise ValueError(f"an Allreduce needs at least one rank, got {ranks}")
    if ranks == 1:
        return 0.0
    p, n = ranks, float(nbytes)
    if algorithm == "ring":
        return 2 * (p - 1) * alpha + (p - 1) / p * n * (2 * beta + gamma)
    if algorithm == "tree":
        steps = math.ceil(math.log2(p))
        return 2 * steps * (alpha + n * beta) + steps * n * gamma
    power = 1 << (p.bit_length() - 1)  # the largest power of two <= p
    folded = 0.0 if power == p else (alpha + n * beta + n * gamma) + (alpha + n * beta)
    steps = power.bit_length() - 1
    if algorithm == "recursive_doubling":
        return folded + steps * (alpha + n * beta + n * gamma)
    return folded + 2 * steps * alpha + (power - 1) / power * n * (2 * beta + gamma)

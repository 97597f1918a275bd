"""Run under mpiexec: the weighted exchange gives the exact weighted sum on every rank, for the
small tensors it packs and the large one it reduces in place alike."""

import sys

import numpy as np
from dynalloc.runtime.mxnet.exchange import IN_PLACE_VALUES, GradientExchange

LARGE = (IN_PLACE_VALUES + 3,)
exchange = GradientExchange(
    [np.zeros((3, 4), np.float32), np.zeros(LARGE, np.float32), np.zeros(5, np.float32)]
)
assert len(exchange.large) == 1 and len(exchange.small) == 2
rank, size = exchange.rank, exchange.size


def local(r):
    rng = np.random.default_rng(r)
    return [
        rng.standard_normal((3, 4)).astype(np.float32),
        rng.standard_normal(LARGE).astype(np.float32),
        rng.standard_normal(5).astype(np.float32),
    ]


for tensor, value in zip(exchange.tensors, local(rank), strict=True):
    tensor[:] = value.reshape(-1)
weights = [(r + 1) / sum(range(1, size + 1)) for r in range(size)]
exchange.allreduce(weights[rank])
for i, tensor in enumerate(exchange.tensors):
    expected = sum(w * local(r)[i].reshape(-1) for r, w in enumerate(weights))
    np.testing.assert_allclose(tensor, expected, rtol=1e-5, atol=1e-6)

for tensor, value in zip(exchange.tensors, local(rank), strict=True):
    tensor[:] = value.reshape(-1)
exchange.allreduce()  # unweighted: the plain sum
for i, tensor in enumerate(exchange.tensors):
    expected = sum(local(r)[i].reshape(-1) for r in range(size))
    np.testing.assert_allclose(tensor, expected, rtol=1e-5, atol=1e-6)

times = exchange.allgather([rank * 1.5, 7.0])
assert times.tolist() == [[r * 1.5, 7.0] for r in range(size)], times
assert exchange.allsum([1.0, rank]).tolist() == [size, sum(range(size))]

for tensor in exchange.tensors:
    tensor[:] = rank  # different on every rank ...
exchange.broadcast()
assert all(np.all(tensor == 0) for tensor in exchange.tensors)  # ... until rank 0's arrive
print(f"rank {rank} of {size} ok")
sys.exit(0)

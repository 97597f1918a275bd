"""Where a rank's samples come from: rows of staged arrays (`ArrayFeed`) or images of a streamed
dataset decoded beside the rank and ahead of it (`StreamFeed`, DESIGN.md).

Both hand out one iteration's share by (epoch, batch, shares) and the rank's slice of the test
set, so the loop, the Recorder and the dist_sync baseline read either kind alike, as the
framework's tensors: `tensors(x, y)` makes them of numpy arrays (MXNet's NDArrays, PyTorch's
tensors).
"""

import os

import numpy as np

from dynalloc.data.augment import normalise
from dynalloc.data.readahead import Decoder, ReadAhead
from dynalloc.data.streamed import StreamedDataset
from dynalloc.launcher import local_size

EVAL_CHUNK = 1024  # test samples per forward pass of the evaluation
MAX_DEFAULT_WORKERS = 8


def make_feed(setup, rank, tensors):
    """The feed of `rank` for the Setup's dataset, in the tensors `tensors(x, y)` makes."""
    if isinstance(setup.data, StreamedDataset):
        return StreamFeed(setup, rank, tensors)
    return ArrayFeed(setup.data, tensors)


class ArrayFeed:
    """Rows of memory-mapped arrays, read in file order (sequential reads; the order within a
    share does not change its gradient)."""

    def __init__(self, data, tensors):
        self.data, self.tensors = data, tensors
        self.replaced = []
        self.read_s = 0.0  # rows of a memory map: their reading is the data_s measured

    def batch(self, epoch, batch, iteration, shares, indices):
        rows = np.sort(indices)
        return self.tensors(self.data.train_x[rows], self.data.train_y[rows])

    def test_batches(self, rank, ranks):
        lo, hi = _slice(self.data.test_size, rank, ranks)
        for start in range(lo, hi, EVAL_CHUNK):
            rows = slice(start, min(start + EVAL_CHUNK, hi))
            yield self.tensors(self.data.test_x[rows], self.data.test_y[rows])

    def close(self):
        pass


class StreamFeed:
    """Images decoded by a pool of `stream.decode_workers` threads, one iteration ahead."""

    def __init__(self, setup, rank, tensors):
        config, data = setup.config, setup.data
        self.tensors = tensors
        stream = config["stream"]
        self.sampler, self.scenario, self.rank, self.total = (
            setup.sampler,
            setup.scenario,
            rank,
            setup.total,
        )
        norm = data.manifest["normalisation"]
        self.mean = stream["mean"] or norm["mean"]
        self.std = stream["std"] or norm["std"]
        workers = stream["decode_workers"]
        if workers is None:  # the cores this rank may use (after pinning), less its own
            cores = len(os.sched_getaffinity(0))
            if cores == os.cpu_count():  # not pinned: the node's cores are every local rank's
                cores //= local_size()
            workers = min(MAX_DEFAULT_WORKERS, max(1, cores - 1))
        self.workers = workers
        decoder = Decoder(data, setup.input_shape[1:], stream, config["seed"])
        self.ahead = ReadAhead(decoder, workers)
        self.test_size = data.test_size
        self.replaced = []  # the bad records skipped so far (`stream.on_bad_record: skip`)
        self.read_s = 0.0  # the last batch's reading, hidden or not (`ReadAhead.read_s`)
        self._orders = {}

    def batch(self, epoch, batch, iteration, shares, indices):
        slow = self.scenario.read_factor(self.rank, iteration)
        images, labels, replaced = self.ahead.take("train", epoch, indices, slow)
        self.replaced += replaced
        self.read_s = self.ahead.read_s
        if iteration + 1 < self.total:
            self._read_ahead(epoch, batch, iteration + 1, shares)
        return self.tensors(normalise(images, self.mean, self.std), labels)

    def _read_ahead(self, epoch, batch, iteration, shares):
        """Queue the next iteration's samples under the present shares (module docstring)."""
        before, share = int(np.sum(shares[: self.rank])), int(shares[self.rank])
        margin = min(self.ahead.margin(before, before + share), share // 2)
        if batch + 1 == self.sampler.batches_per_epoch:
            epoch, batch = epoch + 1, 0
        else:
            batch += 1
        shares = self.sampler.shares_for(batch, shares)
        order = self._order(epoch)
        first = batch * self.sampler.global_batch
        lo = first + int(np.sum(shares[: self.rank]))
        hi = lo + int(shares[self.rank])
        end = first + self.sampler.batch_size(batch)
        core = order[lo:hi]
        # Each side from the boundary outwards: what a small move needs is decoded first.
        margins = (order[max(first, lo - margin) : lo][::-1], order[hi : min(end, hi + margin)])
        slow = self.scenario.read_factor(self.rank, iteration)
        self.ahead.request("train", epoch, core, margins, slow)

    def _order(self, epoch):
        if epoch not in self._orders:
            self._orders = {e: o for e, o in self._orders.items() if e >= epoch - 1}
            self._orders[epoch] = self.sampler.permutation(epoch)
        return self._orders[epoch]

    def test_batches(self, rank, ranks):
        lo, hi = _slice(self.test_size, rank, ranks)
        starts = list(range(lo, hi, EVAL_CHUNK))
        chunks = [np.arange(s, min(s + EVAL_CHUNK, hi)) for s in starts]
        for i, positions in enumerate(chunks):
            images, labels, replaced = self.ahead.take("test", 0, positions)
            self.replaced += replaced
            if i + 1 < len(chunks):  # decoded while this chunk is evaluated
                self.ahead.request("test", 0, chunks[i + 1])
            yield self.tensors(normalise(images, self.mean, self.std), labels)

    def close(self):
        self.ahead.close()


def _slice(n, rank, ranks):
    return n * rank // ranks, n * (rank + 1) // ranks

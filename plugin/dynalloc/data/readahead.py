"""A rank's decode pool and its read-ahead: the samples of the next iteration are decoded while
this one computes and exchanges, though the shares of the next are decided only after it.

How the read-ahead follows the shares: when a rank takes iteration k's samples, it asks the
pool for iteration k+1's samples under the shares of k (the policy keeps them, or moves a
boundary by a few samples, in most iterations), widened at both ends by a margin: the largest
move of either of its boundaries over the last few iterations, at most half its share. The core
is cut into one chunk per worker and queued first; the margins come after, in small chunks
from the boundaries outwards. When k+1 is taken under its real shares, every sample already
queued is used, the margin chunks nobody needs are cancelled if not yet started (a small one
may be running: the next core waits for no more than it), and the few samples that a boundary
moved beyond the margin are decoded then, on the critical path, where `data_s` shows them. A
decoded sample depends only on (seed, epoch, index), so which rank decodes it, and when, does
not change its pixels.

Threads, not processes: Pillow releases the GIL while it decodes and resizes, so threads decode
side by side with the rank's MXNet compute, share the rank's index and open files, and die with
it (Gluon's DataLoader forks workers, which outlive a killed rank and copy its memory).
"""

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from dynalloc.data.augment import eval_boxes, train_boxes
from dynalloc.data.images import BadImage, decode_into
from dynalloc.data.records import BadRecord

MOVES_REMEMBERED = 4  # iterations whose boundary moves set the margin
MARGIN_CHUNK = 16  # samples per margin chunk: what a take may wait for beyond its own


class Chunk(NamedTuple):
    positions: np.ndarray  # the samples asked for
    images: np.ndarray  # (n, H, W, C) uint8
    labels: np.ndarray  # int32
    replaced: list  # (position, bad record's name) where another image stood in for it
    failed: dict  # position -> why it is bad (`on_bad_record: stop`), raised if it is taken
    done: float  # time.perf_counter() when it was decoded


class Decoder:
    """Decodes and transforms the samples of a StreamedDataset into uint8 arrays of one size."""

    def __init__(self, dataset, size, stream, seed):
        self.dataset, self.size, self.stream, self.seed = dataset, tuple(size), stream, seed

    def chunk(self, split, epoch, positions, slowdown=1.0):
        """The samples `positions` of `split`: training ones augmented for `epoch`, test ones
        resized and centre-cropped. `slowdown` > 1 sleeps (slowdown - 1) x the time taken."""
        began = time.perf_counter()
        positions = np.asarray(positions, dtype=np.int64)
        images = np.empty((len(positions), *self.size, self.dataset.channels), np.uint8)
        labels = np.empty(len(positions), np.int32)
        boxes, flips = self._boxes(split, epoch, positions)  # for the chunk at once
        replaced, failed = [], {}
        for i, position in enumerate(positions):
            try:
                labels[i] = self._decode(
                    split, epoch, int(position), (boxes[i], flips[i]), images[i], replaced
                )
            except BadRecord as error:  # a read-ahead may hold samples no one takes from here
                failed[int(position)] = str(error)
        if slowdown > 1:
            time.sleep((slowdown - 1) * (time.perf_counter() - began))
        return Chunk(positions, images, labels, replaced, failed, time.perf_counter())

    def _decode(self, split, epoch, position, crop, out, replaced):
        """Decode one sample into `out`; a bad one stops the run, or under `on_bad_record:
        skip` is replaced by the next good sample of the split (the same one on every run)."""
        n = len(self.dataset.index[split])
        for step in range(n):
            candidate = (position + step) % n
            try:
                label, payload = self.dataset.read(split, candidate)
                if step:
                    crop = tuple(part[0] for part in self._boxes(split, epoch, [candidate]))
                decode_into(out, payload, self.dataset.channels, crop[0], bool(crop[1]))
                return label
            except (BadRecord, BadImage) as error:
                message = str(error)
                if isinstance(error, BadImage):
                    message = f"{self.dataset.name(split, candidate)}: {error}"
                if self.stream["on_bad_record"] != "skip":
                    hint = "(stream.on_bad_record: skip would skip it)"
                    raise BadRecord(f"{message} {hint}") from None
                replaced.append((position, message))
        raise BadRecord(f"{self.dataset.path}: no image of the {split} split decodes")

    def _boxes(self, split, epoch, positions):
        rows = self.dataset.index[split][positions]
        heights, widths = rows["height"], rows["width"]
        if split == "test":
            boxes = eval_boxes(heights, widths, *self.size, self.stream["eval_crop"])
            return boxes, np.zeros(len(boxes), bool)
        return train_boxes(
            self.seed,
            epoch,
            positions,
            heights,
            widths,
            self.stream["crop_scale"],
            self.stream["crop_ratio"],
            self.stream["flip"],
        )


class ReadAhead:
    """Decoded samples asked for ahead (`request`) and collected when needed (`take`).

    `read_s`, after each take: how long reading the samples taken took, from the request that
    queued them (or from the take, for what was not queued) until the last of them was decoded:
    what the rank's reads cost, whether the read-ahead hid it behind the compute or not. The
    policies balance it (`runtime.common.allocation`): a read-ahead that hides a slow disk is no
    reason to give its rank more samples than the disk can deliver in an iteration."""

    def __init__(self, decoder, workers):
        self.decoder, self.workers = decoder, workers
        self.pool = ThreadPoolExecutor(workers, "decode") if workers else None
        self.pending = {}  # (split, epoch, position) -> future of the chunk holding it
        self.asked = {}  # split -> time.perf_counter() of its last request
        self.read_s = 0.0
        self.moves = deque(maxlen=MOVES_REMEMBERED)
        self.bounds = None

    def margin(self, lo, hi):
        """Record where this rank's piece of the global batch now starts and ends, and return
        how far beyond those bounds to read ahead: the largest recent move of either one."""
        if self.bounds is not None:
            self.moves.append(max(abs(lo - self.bounds[0]), abs(hi - self.bounds[1])))
        self.bounds = (lo, hi)
        return max(self.moves, default=0)

    def request(self, split, epoch, core, margins=(), slowdown=1.0):
        """Queue the decoding of `core` (cut into one chunk per worker), then of `margins`
        (each ordered from its boundary outwards) in small chunks, the sides taking turns."""
        if self.pool is None:
            return
        self.asked[split] = time.perf_counter()
        groups = [c for c in np.array_split(np.asarray(core), self.workers) if len(c)]
        sides = [
            [m[i : i + MARGIN_CHUNK] for i in range(0, len(m), MARGIN_CHUNK)]
            for m in map(np.asarray, margins)
        ]
        for turn in range(max(map(len, sides), default=0)):
            groups += [side[turn] for side in sides if turn < len(side)]
        for group in groups:
            wanted = [p for p in group if (split, epoch, int(p)) not in self.pending]
            if wanted:
                future = self.pool.submit(self.decoder.chunk, split, epoch, wanted, slowdown)
                for p in wanted:
                    self.pending[(split, epoch, int(p))] = future

    def take(self, split, epoch, positions, slowdown=1.0):
        """(images, labels, replaced) of `positions` in their order, from what was queued and,
        for the rest, decoded now; then everything else queued is dropped."""
        began = time.perf_counter()
        positions = np.asarray(positions, dtype=np.int64)
        if not len(positions):
            self.read_s = 0.0
            empty = np.empty((0, *self.decoder.size, self.decoder.dataset.channels), np.uint8)
            return empty, np.empty(0, np.int32), []
        futures = {}
        for p in positions:
            future = self.pending.pop((split, epoch, int(p)), None)
            if future is not None:
                futures.setdefault(id(future), future)
        chunks = [f.result() for f in futures.values()]
        have = {int(p) for chunk in chunks for p in chunk.positions}
        missing = [int(p) for p in positions if int(p) not in have]
        start = self.asked.get(split, began) if chunks else began
        if missing:
            chunks.append(self.decoder.chunk(split, epoch, missing, slowdown))
        self.read_s = max(chunk.done for chunk in chunks) - start
        self.drop()
        where = {}
        for c, chunk in enumerate(chunks):
            for row, p in enumerate(chunk.positions):
                where[int(p)] = (c, row)
        images = np.empty((len(positions), *chunks[0].images.shape[1:]), np.uint8)
        labels = np.empty(len(positions), np.int32)
        for i, p in enumerate(positions):
            c, row = where[int(p)]
            images[i], labels[i] = chunks[c].images[row], chunks[c].labels[row]
        taken = {int(p) for p in positions}
        for chunk in chunks:
            bad = sorted(taken & chunk.failed.keys())
            if bad:
                raise BadRecord(chunk.failed[bad[0]])
        replaced = [name for chunk in chunks for p, name in chunk.replaced if p in taken]
        return images, labels, replaced

    def drop(self):
        """Forget what was queued and not taken; cancel what has not started."""
        for future in {id(f): f for f in self.pending.values()}.values():
            future.cancel()
        self.pending.clear()

    def close(self):
        self.drop()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

"""Per rank, a run of observations (share, seconds, relative error) in arrival order.

The cost models keep two such runs per rank: the deviations held back until they are confirmed,
and the observations of a drift. At thousands of ranks a Python list per rank would cost a loop
over the ranks after every iteration; one array for all ranks, whose capacity doubles when a run
outgrows it, makes appending to any set of ranks' runs one assignment.
"""

import numpy as np


class Runs:
    """`length[r]` observations of rank r, oldest first, in `share[r]`, `seconds[r]`, `error[r]`
    (rows of one array of shape (3, ranks, capacity))."""

    def __init__(self, ranks, capacity=4):
        self.length = np.zeros(ranks, dtype=np.int64)
        self.data = np.zeros((3, ranks, capacity))
        self.ranks = np.arange(ranks)
        self.longest = 0

    @property
    def share(self):
        return self.data[0]

    @property
    def seconds(self):
        return self.data[1]

    @property
    def error(self):
        return self.data[2]

    def first_error(self):
        """Each rank's oldest error (meaningless where its run is empty)."""
        return self.data[2, :, 0]

    def last_error(self):
        """Each rank's newest error (meaningless where its run is empty)."""
        return self.data[2, self.ranks, np.maximum(self.length - 1, 0)]

    def append(self, mask, share, seconds, error):
        """Append observation r of the per-rank arrays to the run of every rank r in `mask`.
        Every rank's observation is written at the end of its run, and only the masked ranks'
        runs grow to take it in: one assignment, whatever the mask."""
        if self.longest >= self.data.shape[2]:
            self.longest = int(self.length.max())  # runs cleared since: maybe room after all
            if self.longest >= self.data.shape[2]:
                grown = np.zeros((3, len(self.length), 2 * self.data.shape[2]))
                grown[:, :, : self.data.shape[2]] = self.data
                self.data = grown
        self.data[:, self.ranks, self.length] = share, seconds, error
        self.length += mask
        self.longest += 1  # an upper bound of the longest run

    def clear(self, mask):
        self.length[mask] = 0

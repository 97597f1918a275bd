"""Emulated heterogeneity: per-rank slowdown factors and a schedule of changes.

This machine's ranks are identical; users' clusters are not. A `sleep` factor f makes a rank sleep
(f - 1) times its measured compute right after computing, so its compute time is f times longer.
A `contention` span runs real CPU-burning processes on the rank's core: the case of a co-located
job. On a real cluster the scenario is simply absent.

A `jitter` j draws every rank's factor anew each iteration, uniformly from [1, 1 + 2j] times its
other factors (compute jittered by ±j around 1 + j times its time): the noisy cluster. The draw
depends only on (rank, iteration), so every rank and every rerun sees the same noise; another
`jitter_draw` (a positive integer) gives the same scenario with other noise, to check that what
one draw showed is not that draw's luck.

Config form (plain dict)::

    slowdown: [1, 3]                      # static factors, one per rank
    read_slowdown: [1, 3]                 # optional: rank 1's reads of a streamed dataset 3x slower
    jitter: 0.3                           # optional per-iteration noise
    jitter_draw: 0                        # optional: which draw of that noise (0: the usual)
    changes:                              # spans [start, end) of iterations; end null = forever
      - {rank: 1, factor: 3, start: 200, end: 400}
      - {rank: 0, mode: contention, processes: 1, start: 100, end: 300}
      - {rank: 1, mode: read, factor: 3, start: 0, end: null}

A `read` factor f slows a rank's reading of a streamed dataset: each of its decode workers
sleeps (f - 1) times the time it took to read and decode a chunk, the case of a slower disk or
decoder. It shows in `data_s` only when the reads can no longer keep ahead of the compute.
"""

import math
from dataclasses import dataclass

import numpy as np

MODES = ("sleep", "contention", "read")


@dataclass(frozen=True)
class Change:
    rank: int
    start: int
    end: int | None = None
    mode: str = "sleep"
    factor: float = 1.0
    processes: int = 1

    def active(self, iteration):
        return self.start <= iteration and (self.end is None or iteration < self.end)


class Scenario:
    """What each rank suffers at each iteration; pure, so every rank and test agrees."""

    def __init__(
        self, ranks, slowdown=None, changes=(), jitter=0.0, jitter_draw=0, read_slowdown=None
    ):
        self.ranks = ranks
        if isinstance(jitter, bool) or not isinstance(jitter, int | float) or not 0 <= jitter < 1:
            raise ValueError(f"scenario.jitter must be a number in [0, 1), got {jitter!r}")
        if not _integer(jitter_draw) or jitter_draw < 0:
            raise ValueError(f"scenario.jitter_draw must be an integer >= 0, got {jitter_draw!r}")
        self.jitter, self.jitter_draw = float(jitter), jitter_draw
        slowdown = [1.0] * ranks if slowdown is None else slowdown
        if not isinstance(slowdown, list | tuple) or not all(map(_factor, slowdown)):
            raise ValueError(
                f"scenario.slowdown must be a list of finite factors >= 1, got {slowdown!r}"
            )
        if len(slowdown) != ranks:
            raise ValueError(f"scenario.slowdown has {len(slowdown)} factors for {ranks} ranks")
        self.slowdown = [float(f) for f in slowdown]
        read_slowdown = [1.0] * ranks if read_slowdown is None else read_slowdown
        if not isinstance(read_slowdown, list | tuple) or not all(map(_factor, read_slowdown)):
            raise ValueError(
                f"scenario.read_slowdown must be a list of finite factors >= 1, "
                f"got {read_slowdown!r}"
            )
        if len(read_slowdown) != ranks:
            raise ValueError(
                f"scenario.read_slowdown has {len(read_slowdown)} factors for {ranks} ranks"
            )
        self.read_slowdown = [float(f) for f in read_slowdown]
        self.changes = [self._change(i, spec) for i, spec in enumerate(changes or ())]

    def _change(self, i, spec):
        where = f"scenario.changes[{i}]"
        if not isinstance(spec, dict):
            raise ValueError(f"{where} must be a mapping, got {spec!r}")
        unknown = set(spec) - {"rank", "start", "end", "mode", "factor", "processes"}
        if unknown:
            raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        try:
            change = Change(**spec)
        except TypeError as error:
            raise ValueError(f"{where}: {error}") from None
        if not (_integer(change.rank) and 0 <= change.rank < self.ranks):
            raise ValueError(
                f"{where}.rank {change.rank!r} names no rank of this run "
                f"(ranks 0..{self.ranks - 1})"
            )
        if change.mode not in MODES:
            raise ValueError(f"{where}.mode {change.mode!r} is not one of {', '.join(MODES)}")
        if not (_integer(change.start) and change.start >= 0):
            raise ValueError(f"{where}.start must be an iteration >= 0, got {change.start!r}")
        if change.end is not None and not (_integer(change.end) and change.end > change.start):
            raise ValueError(
                f"{where}.end must be an iteration after start {change.start} "
                f"(or null), got {change.end!r}"
            )
        if change.mode in ("sleep", "read") and not _factor(change.factor):
            raise ValueError(f"{where}.factor must be a finite number >= 1, got {change.factor!r}")
        if change.mode == "contention" and not (
            _integer(change.processes) and change.processes >= 1
        ):
            raise ValueError(
                f"{where}.processes must be a positive integer, got {change.processes!r}"
            )
        return change

    def factor(self, rank, iteration):
        """Sleep factor of `rank` at `iteration`: static factor times active sleep changes
        times this iteration's jitter."""
        f = self.slowdown[rank]
        if self.jitter:
            key = [rank, iteration] if not self.jitter_draw else [self.jitter_draw, rank, iteration]
            draw = np.random.default_rng(key).uniform(-1.0, 1.0)
            f *= 1.0 + self.jitter * (1.0 + draw)
        for change in self.changes:
            if change.mode == "sleep" and change.rank == rank and change.active(iteration):
                f *= change.factor
        return f

    def read_factor(self, rank, iteration):
        """How much slower `rank` reads a streamed dataset at `iteration`."""
        f = self.read_slowdown[rank]
        for change in self.changes:
            if change.mode == "read" and change.rank == rank and change.active(iteration):
                f *= change.factor
        return f

    def burners(self, rank, iteration):
        """CPU-burning processes that should run on `rank`'s core at `iteration`."""
        return sum(
            c.processes
            for c in self.changes
            if c.mode == "contention" and c.rank == rank and c.active(iteration)
        )

    def nominal_slowdown(self, rank, iteration):
        """How much slower the rank nominally runs: sleep factor x (1 + burners on its core)."""
        return self.factor(rank, iteration) * (1 + self.burners(rank, iteration))

    def static_speeds(self):
        """Relative speeds for the oracle policy when no change is scheduled."""
        return [1.0 / f for f in self.slowdown]


def _integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _factor(value):
    """A slowdown factor: a real number, finite, at least 1."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 1
    )

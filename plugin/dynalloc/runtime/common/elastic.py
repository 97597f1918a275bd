"""Elastic training: a lost rank or node ends one launch of a run, not the run.

The job's supervisor (`runtime.common.job`) launches the training; when a launch ends because
ranks were lost (a rank killed: its host's peer watch names it; a node cut off: the stall watch
names the ranks that stopped answering, and their hosts; srun names the tasks it lost), and the
run config's `elastic` section allows it (`experiment.elastic_spec`), it launches it again at
once on the ranks that remain: the run config rewritten for them (their per-rank scenario and
bounds, and adaptive started from their own costs, fitted from the checkpoint's rows, so the
first split after the loss is balanced), the launcher's `-n` made their number and, for srun,
the lost nodes excluded. The run resumes from its last checkpoint; the global batch, the sample
order and each sample once an epoch are the run's, whatever the ranks.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from dynalloc.core.adaptive import AdaptivePolicy
from dynalloc.core.costmodel import AffineCostModels
from dynalloc.core.state import OBJECT, restore, same_layout
from dynalloc.errors import DynallocError
from dynalloc.experiment.elastic_spec import check_elastic, for_survivors
from dynalloc.experiment.run_config import load_config
from dynalloc.fsutil import atomic_write
from dynalloc.rundir import ROW_FIELDS
from dynalloc.runtime.common import checkpoint

LOST = re.compile(r"rank (\d+) \(pid \d+\) was lost")  # the peer watch's line
SILENT = re.compile(r"(\d+) \(pid \d+ on ([^)\s]+)\)")  # the stall watch's list of ranks


def lost_ranks(text):
    """(ranks, hosts): the ranks a launch's output says were lost, and the hosts cut off, which
    a new launch must not use. A rank that died is named by its host's peer watch, and only it
    is lost: the launcher then ends the others (srun's "tasks 2-3: Killed"), which stop
    answering too. Without that line (a host cut off takes its watch along), the ranks that
    stopped answering are lost, with their hosts."""
    died = {int(rank) for rank in LOST.findall(text)}
    if died:
        return died, set()
    ranks, hosts = set(), set()
    for line in text.splitlines():
        if "stopped answering" in line:
            for rank, host in SILENT.findall(line.split(":", 3)[-1]):
                ranks.add(int(rank))
                hosts.add(host)
    return ranks, hosts


@dataclass
class Elastic:
    """One run's restarts: its run config, the ranks of the current launch (their numbers in the
    original launch, in rank order; a rank that joined later has a number past them), the
    launch slots the job still has (the original ranks, less those of hosts cut off), the hosts
    excluded, the restarts made."""

    config_path: Path
    out: Path
    elastic: dict
    ranks: list
    slots: int
    excluded: set = field(default_factory=set)
    restarts: int = 0

    @classmethod
    def of(cls, command):
        """The Elastic of a launch command of `dynalloc train` whose run config allows
        restarts, else None."""
        config_path, out = _option(command, "--config"), _option(command, "--out")
        if config_path is None or out is None or "-n" not in command:
            return None
        raw = load_config(config_path)
        ranks = int(command[command.index("-n") + 1])
        elastic = check_elastic(raw.get("elastic"), ranks)
        if not elastic["max_restarts"]:
            return None
        return cls(Path(config_path), Path(out), elastic, list(range(ranks)), ranks)

    def restart(self, command, output):
        """The command that goes on after the launch `command` ended with `output`, or None
        when no rank was lost, too few remain, or the restarts are spent; why, as a line.
        The survivors go on; with `max_ranks`, new ranks join them in the job's free slots (a
        killed rank's, not a cut-off host's), up to max_ranks."""
        if self.restarts >= self.elastic["max_restarts"]:
            return None, f"no restart left (elastic.max_restarts {self.elastic['max_restarts']})"
        lost, hosts = lost_ranks(output)
        lost &= set(range(len(self.ranks)))
        if not lost:
            return None, "no rank was lost: not a failure a restart cures"
        survivors = [r for i, r in enumerate(self.ranks) if i not in lost]
        if len(survivors) < (self.elastic["min_ranks"] or 1):
            return None, (f"{len(survivors)} ranks remain, fewer than elastic.min_ranks "
                          f"{self.elastic['min_ranks']}")  # fmt: skip
        self.restarts += 1
        self.excluded |= hosts
        if hosts:
            self.slots -= len(lost)  # the ranks of hosts cut off: their slots are gone too
        newest = max(self.ranks) + 1
        joining = min(self.elastic["max_ranks"] or 0, self.slots) - len(survivors)
        ranks = survivors + list(range(newest, newest + max(joining, 0)))
        config = self._survivors_config(ranks)
        self.ranks = ranks
        return self._command(command, config, len(ranks)), (
            f"restart {self.restarts} of {self.elastic['max_restarts']}: ranks "
            f"{sorted(lost)} of the last launch lost; going on with {len(ranks)} ranks"
            + (f", without {', '.join(sorted(hosts))}" if hosts else "")
            + (f", {joining} of them new" if joining > 0 else "")
        )

    def _survivors_config(self, ranks):
        """The run config for `ranks` (as `self.ranks` numbers them), written beside the run."""
        raw = load_config(self.config_path)
        config = for_survivors(raw, ranks, self._costs(ranks))
        path = self.out.parent / f"{self.out.name}.elastic-{self.restarts}.yaml"
        with atomic_write(path) as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
        return path

    def _costs(self, ranks):
        """Each rank's own cost (its emulated slowdown divided out), as `warm_start` takes
        them, from what adaptive had learnt of it by the run's newest checkpoint (the last
        launch's ranks, which `self.ranks` lists); a rank that joins is taken for the survivors'
        median until it is measured. None without such a checkpoint."""
        try:
            found = checkpoint.newest_valid(self.out, lambda message: None)
        except DynallocError:
            return None
        if found is None or len(self.ranks) != found[1]["config"]["ranks"]:
            return None
        costs = learnt_costs(found[1]["policy"], found[1]["books"]["rows"])
        if costs is None:
            return None
        a, c, noise = costs
        kept = [self.ranks.index(r) for r in ranks if r in self.ranks]

        def each(values):
            known = [float(values[i]) for i in kept]
            return known + [float(np.median(known))] * (len(ranks) - len(kept))

        return {"intercept_s": each(a), "per_sample_s": each(c), "noise": noise}

    def _command(self, command, config, ranks):
        command = list(command)
        command[command.index("-n") + 1] = str(ranks)
        command[command.index("--config") + 1] = str(config)
        if Path(command[0]).name == "srun":
            # The last step lingers on a node cut off (slurmctld holds its CPUs everywhere until
            # SlurmdTimeout, 300 s by default): the new one shares them, on the other nodes.
            command = [c for c in command if not c.startswith("--exclude=") and c != "--overlap"]
            excluded = [f"--exclude={','.join(sorted(self.excluded))}"] if self.excluded else []
            command[1:1] = ["--overlap", *excluded]
        return command


def learnt_costs(state, rows):
    """(a, c, noise): each rank's own affine cost as an adaptive policy's exported `state` has
    learnt it, the slowdown its ranks last had (in `rows`, a checkpoint's) divided out, or None
    for another policy or one that has not seen every rank yet. The policy's models weigh the
    recent iterations most, which a fit of the rows cannot (a launch of a few iterations at
    nearly even shares leaves it ill-conditioned)."""
    if state.get(OBJECT) != AdaptivePolicy.__qualname__ or not rows:
        return None
    attributes = state["attributes"]
    ranks = len(attributes["shares"])
    models = AffineCostModels(ranks)
    if not same_layout(models, attributes["models"]):
        return None
    restore(models, attributes["models"])
    if not models.complete:
        return None
    a, c = models.coefficients()
    slowdown = np.ones(ranks)
    for row in rows[-ranks:]:
        slowdown[int(row[ROW_FIELDS.index("rank")])] = float(row[ROW_FIELDS.index("slowdown")])
    scale = float(attributes["common"]) / slowdown
    if not (np.isfinite(a).all() and (c > 0).all()):
        return None
    return np.maximum(a, 0) * scale, c * scale, float(np.median(models.noise))


def _option(command, name):
    return command[command.index(name) + 1] if name in command[:-1] else None

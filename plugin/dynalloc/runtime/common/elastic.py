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
SRUN_LOST = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): (?:Killed|Terminated|Exited)")


def lost_ranks(text):
    """(ranks, hosts): the ranks a launch's output says were lost, and the hosts cut off (those
    whose ranks stopped answering, which a new launch must not use)."""
    ranks, hosts = {int(r) for r in LOST.findall(text)}, set()
    for line in text.splitlines():
        if "stopped answering" in line:
            for rank, host in SILENT.findall(line.split(":", 3)[-1]):
                ranks.add(int(rank))
                hosts.add(host)
        for _node, tasks in SRUN_LOST.findall(line):  # killed tasks: their node lives
            for part in tasks.split(","):
                low, _, high = part.partition("-")
                ranks.update(range(int(low), int(high or low) + 1))
    return ranks, hosts


@dataclass
class Elastic:
    """One run's restarts: its run config, the ranks of the original launch still in it (their
    original numbers, in rank order), the hosts excluded, the restarts made."""

    config_path: Path
    out: Path
    elastic: dict
    ranks: list
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
        return cls(Path(config_path), Path(out), elastic, list(range(ranks)))

    def restart(self, command, output):
        """The command that goes on after the launch `command` ended with `output`, or None
        when no rank was lost, too few remain, or the restarts are spent; why, as a line."""
        if self.restarts >= self.elastic["max_restarts"]:
            return None, f"no restart left (elastic.max_restarts {self.elastic['max_restarts']})"
        lost, hosts = lost_ranks(output)
        lost &= set(range(len(self.ranks)))
        if not lost:
            return None, "no rank was lost: not a failure a restart cures"
        survivors = [r for i, r in enumerate(self.ranks) if i not in lost]
        cap = self.elastic["max_ranks"] or len(survivors)
        survivors = survivors[:cap]
        if len(survivors) < (self.elastic["min_ranks"] or 1):
            return None, (f"{len(survivors)} ranks remain, fewer than elastic.min_ranks "
                          f"{self.elastic['min_ranks']}")  # fmt: skip
        self.restarts += 1
        self.excluded |= hosts
        config = self._survivors_config(survivors)
        self.ranks = survivors
        return self._command(command, config, len(survivors)), (
            f"restart {self.restarts} of {self.elastic['max_restarts']}: ranks "
            f"{sorted(lost)} of the last launch lost; going on with {len(survivors)} ranks"
            + (f", without {', '.join(sorted(hosts))}" if hosts else "")
        )

    def _survivors_config(self, survivors):
        """The run config for `survivors` (original rank numbers), written beside the run."""
        raw = load_config(self.config_path)
        config = for_survivors(raw, survivors, self._costs(survivors))
        path = self.out.parent / f"{self.out.name}.elastic-{self.restarts}.yaml"
        with atomic_write(path) as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
        return path

    def _costs(self, survivors):
        """Each survivor's own cost (its emulated slowdown divided out), as `warm_start` takes
        them, from what adaptive had learnt of it by the run's newest checkpoint (the last
        launch's ranks, which `self.ranks` lists); None without such a checkpoint."""
        try:
            found = checkpoint.newest_valid(self.out, lambda message: None)
        except DynallocError:
            return None
        if found is None or len(self.ranks) != found[1]["config"]["ranks"]:
            return None
        costs = learnt_costs(found[1]["policy"], found[1]["books"]["rows"])
        if costs is None:
            return None
        mine = [self.ranks.index(r) for r in survivors]
        a, c, noise = costs
        return {"intercept_s": [float(a[r]) for r in mine],
                "per_sample_s": [float(c[r]) for r in mine], "noise": noise}  # fmt: skip

    def _command(self, command, config, ranks):
        command = list(command)
        command[command.index("-n") + 1] = str(ranks)
        command[command.index("--config") + 1] = str(config)
        if self.excluded and Path(command[0]).name == "srun":
            command.insert(1, f"--exclude={','.join(sorted(self.excluded))}")
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

"""`runtime.common.elastic` on launch outputs and checkpoints: which ranks a launch lost, the
command that goes on without them, and the costs the survivors start from."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from dynalloc.core.policies import make_policy
from dynalloc.core.state import export
from dynalloc.rundir import Row
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.elastic import Elastic, learnt_costs, lost_ranks

STALL = (
    "dynalloc train: error: rank 0: no progress for 12.0 s after 40 iterations (stall bound "
    "10.0 s): ranks 2 (pid 311 on node3), 3 (pid 312 on node3) stopped answering; ending the "
    "job (exit 69); rerun to resume from the last checkpoint"
)


def test_a_rank_that_died_is_lost_and_ranks_that_stopped_answering_without_it_with_hosts():
    watch = "dynalloc train: error: rank 1 (pid 4038) was lost (killed or crashed); stopping"
    srun = "srun: error: n2: tasks 1,3: Killed"
    assert lost_ranks("\n".join([watch, watch, STALL, srun])) == ({1}, set())
    assert lost_ranks(STALL + "\n" + srun) == ({2, 3}, {"node3"})
    assert lost_ranks("dynalloc train: error: the loss became nan\n" + srun) == (set(), set())


def launch(tmp_path, ranks=4, elastic=None, launcher=("mpiexec",)):
    raw = {"dataset": "d", "policy": "adaptive", "scenario": {"slowdown": [1, 2, 3, 4][:ranks]},
           "elastic": elastic or {"min_ranks": 2, "max_restarts": 2}}  # fmt: skip
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    command = [*launcher, "-n", str(ranks), "dynalloc", "train", "--config", str(config),
               "--out", str(tmp_path / "run")]  # fmt: skip
    return command, Elastic.of(command)


def test_a_run_without_restarts_is_not_elastic(tmp_path):
    assert launch(tmp_path, elastic={"max_restarts": 0})[1] is None
    assert Elastic.of(["dynalloc", "baseline", "--workers", "2"]) is None


def test_a_restart_goes_on_with_the_survivors_and_excludes_cut_off_hosts(tmp_path):
    command, elastic = launch(tmp_path, launcher=("srun", "--mpi=pmi2"))
    again, why = elastic.restart(command, STALL)
    assert why == (
        "restart 1 of 2: ranks [2, 3] of the last launch lost; going on with 2 ranks, without node3"
    )
    assert again[:5] == ["srun", "--overlap", "--exclude=node3", "--mpi=pmi2", "-n"]
    assert again[5] == "2"
    config = yaml.safe_load(Path(again[again.index("--config") + 1]).read_text())
    assert config["scenario"]["slowdown"] == [1, 2]
    lost = "dynalloc train: error: rank 0 (pid 9) was lost (killed or crashed)"
    third, why = elastic.restart(again, lost)
    assert third is None and why == "1 ranks remain, fewer than elastic.min_ranks 2"


def test_restarts_are_bounded_and_only_a_loss_is_cured(tmp_path):
    command, elastic = launch(tmp_path, elastic={"max_restarts": 1})
    assert elastic.restart(command, "dynalloc train: error: the loss became nan") == (
        None, "no rank was lost: not a failure a restart cures")  # fmt: skip
    lost = "dynalloc train: error: rank 3 (pid 9) was lost (killed or crashed)"
    again, _ = elastic.restart(command, lost)
    assert again[again.index("-n") + 1] == "3"
    assert elastic.restart(again, lost.replace("rank 3", "rank 1")) == (
        None, "no restart left (elastic.max_restarts 1)")  # fmt: skip


def rows_of(policy, shares, seconds, slowdown, iterations=30):
    rows = []
    for i in range(iterations):
        for r, share in enumerate(shares):
            rows.append(list(Row(i, 0, r, int(share), seconds[r], 0, 0, 0, 0, slowdown[r], "a")))
        policy.update(np.array(shares), np.array(seconds), i + 1, False)
        shares = policy.shares
        seconds = [0.01 + 0.002 * s * f for s, f in zip(shares, slowdown, strict=True)]
    return rows


def test_survivors_start_from_the_costs_adaptive_learnt_with_their_slowdown_divided_out():
    policy = make_policy("adaptive", 3, 96)
    slowdown = [1.0, 2.0, 4.0]
    rows = rows_of(policy, [32, 32, 32], [0.07, 0.13, 0.27], slowdown)
    a, c, noise = learnt_costs(export(policy), rows)
    # Rank r took 0.01 + 0.002 f_r b: its own cost (f_r divided out) is 0.01 / f_r + 0.002 b.
    assert c == pytest.approx([0.002] * 3, rel=0.15)
    assert a == pytest.approx([0.01 / f for f in slowdown], rel=0.3)
    assert np.isfinite(noise)
    assert learnt_costs(export(make_policy("static", 3, 96)), rows) is None
    assert learnt_costs(export(make_policy("adaptive", 3, 96)), rows) is None  # nothing seen


@pytest.mark.parametrize("max_ranks", [None, 3])
def test_the_survivors_config_carries_their_learnt_costs(tmp_path, max_ranks):
    elastic_section = {"min_ranks": 2, "max_ranks": max_ranks, "max_restarts": 2}
    command, elastic = launch(tmp_path, ranks=3, elastic=elastic_section)
    policy = make_policy("adaptive", 3, 96)
    slowdown = [1.0, 2.0, 3.0]
    rows = rows_of(policy, [32, 32, 32], [0.07, 0.13, 0.2], slowdown)
    payload = {"config": {"ranks": 3}, "iteration": 30, "policy": export(policy),
               "books": {"rows": rows}, "complete": False}  # fmt: skip
    checkpoint.write(tmp_path / "run", 30, payload, keep=1)
    lost = "dynalloc train: error: rank 1 (pid 9) was lost (killed or crashed)"
    again, _ = elastic.restart(command, lost)
    config = yaml.safe_load(Path(again[again.index("--config") + 1]).read_text())
    warm = config["policy"]["warm_start"]
    a, c, _ = learnt_costs(export(policy), rows)
    joined = [] if max_ranks is None else [np.median([c[0], c[2]])]  # taken for the median
    assert warm["per_sample_s"] == pytest.approx([c[0], c[2], *joined])
    assert warm["intercept_s"][:2] == pytest.approx([a[0], a[2]])
    assert len(warm["intercept_s"]) == len(warm["per_sample_s"])


def test_with_max_ranks_new_ranks_join_in_the_slots_the_job_still_has(tmp_path):
    command, elastic = launch(tmp_path, elastic={"max_ranks": 4, "max_restarts": 3},
                              launcher=("srun",))  # fmt: skip
    lost = "dynalloc train: error: rank 1 (pid 9) was lost (killed or crashed)"
    again, why = elastic.restart(command, lost)  # a killed rank's slot: a new rank takes it
    assert why == (
        "restart 1 of 3: ranks [1] of the last launch lost; going on with 4 ranks, 1 of them new"
    )
    assert elastic.ranks == [0, 2, 3, 4]
    config = yaml.safe_load(Path(again[again.index("--config") + 1]).read_text())
    assert config["scenario"]["slowdown"] == [1, 3, 4, 1.0]  # the new rank: no emulated slowdown
    again, why = elastic.restart(again, STALL)  # ranks 2 and 3 now: original 3 and new 4
    assert why.endswith("going on with 2 ranks, without node3")  # a cut-off host's slots go
    assert elastic.ranks == [0, 2] and elastic.slots == 2

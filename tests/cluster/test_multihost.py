"""Training across the two nodes of the tests' cluster (conftest.py) through the shipped SLURM
profile: 4 ranks, 2 per node, talking TCP between the nodes' namespaces. `static` trains the
model a one-host run trains, `adaptive` moves samples away from the node emulated slower, and a
run of one rank is a plain one-task job."""

import csv
import json
import statistics
import subprocess
from pathlib import Path

import pytest
from conftest import CLUSTER_ENV
from dynalloc.core.allreduce import allreduce_seconds
from helpers import BIN, ENV, rank_pids, snakemake
from slurmrun import max_difference, on_slurm, output, profile_with, sbatch_jobs

pytestmark = [pytest.mark.mpi, pytest.mark.cluster, pytest.mark.usefixtures("slurm")]

STATIC, ADAPTIVE = (f"mnist5k-lenet-{p}-node2-slow-r4-s0" for p in ("static", "adaptive"))
ONE_RANK = "mnist5k-lenet-static-flat-r1-s0"
# LeNet on 28x28 digits: enough compute per sample that the split, not the fixed costs, sets the
# iteration time (with the tiny MLP adaptive puts nearly every sample on one rank).
POINT = {"dataset": ["mnist5k"], "model": ["lenet"], "seed": [0]}
MULTIHOST = {
    "datasets": {"mnist5k": {"source": "mnist5k"}},
    "scenarios": {"node2-slow": {"slowdown": {2: 3, 3: 3}}, "flat": {}},  # ranks 2, 3: node n2
    "grid": [
        {**POINT, "policy": ["static", "adaptive"], "scenario": ["node2-slow"], "ranks": [4]},
        {**POINT, "policy": ["static"], "scenario": ["flat"], "ranks": [1]},
    ],
    "training": {"global_batch": 256, "iterations": 24},
}


def trained(results, run):
    return results / "runs" / run / "train"


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """The runs of MULTIHOST trained through the shipped profile, 2 ranks per node."""
    folder = tmp_path_factory.mktemp("multihost")
    profile = profile_with(folder, slurm_extra="--ntasks-per-node=2")
    results = folder / "results"
    targets = [trained(results, run) / "model.params" for run in (STATIC, ADAPTIVE, ONE_RANK)]
    run = on_slurm(results, *targets, profile=profile, override=MULTIHOST)
    assert run.returncode == 0, output(run)[-3000:]
    return results, run


@pytest.fixture(scope="module")
def one_host(tmp_path_factory):
    """The static run of MULTIHOST trained on this host alone (the default profile)."""
    results = tmp_path_factory.mktemp("onehost") / "results"
    run = snakemake(trained(results, STATIC) / "model.params", results=results, override=MULTIHOST)
    assert run.returncode == 0, run.stderr[-3000:]
    return results


def test_four_ranks_train_on_two_nodes_two_each(two_nodes):
    results, run = two_nodes
    jobs = sbatch_jobs(output(run), fields="%T|%C|%D")
    assert jobs["train"] == [("COMPLETED", 4, 2)] * 2, jobs
    for name in (STATIC, ADAPTIVE):
        log = (trained(results, name) / "train.log").read_text()
        hosts = [line for line in log.splitlines() if "rank pids:" in line][0].split(": ")[-1]
        assert [pair.split("@")[1] for pair in hosts.split(", ")] == ["n1", "n1", "n2", "n2"]
        assert len(rank_pids(trained(results, name))) == 4


def test_static_over_two_nodes_trains_the_model_of_one_host(two_nodes, one_host):
    results, _ = two_nodes
    difference = max_difference(trained(results, STATIC), trained(one_host, STATIC))
    assert difference <= 1e-4, f"static's parameters differ by {difference}"
    for where, folder in (("two nodes", results), ("one host", one_host)):
        metrics = json.loads((trained(folder, STATIC) / "metrics.json").read_text())
        print(
            f"static on {where}: {metrics['wall_s']:.1f} s, {metrics['samples_per_s']:.0f} "
            f"samples/s, median sync_s per rank {sync_medians(trained(folder, STATIC))}"
        )


def sync_medians(run_dir):
    """The median seconds each rank spent in the gradient exchange (the first iteration out)."""
    with open(run_dir / "iterations.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["iteration"]) > 0]
    ranks = sorted({int(row["rank"]) for row in rows})
    return [
        round(statistics.median(float(r["sync_s"]) for r in rows if int(r["rank"]) == rank), 4)
        for rank in ranks
    ]


def test_adaptive_moves_samples_from_the_slow_node_to_the_fast_one(two_nodes):
    """Judged on each rank's median share over the run's second half: four ranks on two shared
    cores time their iterations with swings of 3x, and two ranks of one node trade samples back
    and forth (rank 0 once ran 101 and then 32 samples), so one iteration's split says little."""
    results, _ = two_nodes
    with open(trained(results, ADAPTIVE) / "iterations.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    half = max(int(row["iteration"]) for row in rows) // 2
    shares = {
        rank: statistics.median(int(row["batch_size"]) for row in rows
                                if int(row["rank"]) == rank and int(row["iteration"]) > half)
        for rank in range(4)
    }  # fmt: skip
    print(f"adaptive's median shares over the second half {[shares[r] for r in range(4)]}")
    assert min(shares[0], shares[1]) > 1.5 * max(shares[2], shares[3]), shares


def test_a_run_of_one_rank_is_a_plain_one_task_job(two_nodes):
    results, run = two_nodes
    assert sbatch_jobs(output(run), fields="%T|%C|%D")["train_one_rank"] == [("COMPLETED", 1, 1)]
    commands = [line for line in output(run).splitlines() if line.startswith("Shell command:")]
    one_rank = [line for line in commands if f"--out {trained(results, ONE_RANK)}" in line]
    assert len(one_rank) == 1 and " -- " in one_rank[0], commands
    launcher = one_rank[0].split(" -- ")[1]
    assert "srun" not in launcher and "mpiexec" not in launcher, launcher
    assert (trained(results, ONE_RANK) / "metrics.json").exists()


def test_the_simulators_network_model_is_a_lower_bound_of_the_measured_allreduce():
    """`dynalloc simulate`'s Allreduce (core.allreduce, Thakur et al.'s formulas) from the
    latency and seconds per byte of a ping-pong between the nodes (its fastest round trips),
    against the Allreduce of LeNet's gradient measured on the 4 ranks. The model sees the links
    only: here the four ranks and the kernel's TCP work share two cores, which it cannot
    know."""
    probe = subprocess.run(
        ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmi2", BIN / "python",
         Path(__file__).with_name("exchange_probe.py")],
        capture_output=True, text=True, timeout=300, env={**ENV, **CLUSTER_ENV},
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    figures = json.loads(probe.stdout)
    predicted = allreduce_seconds("ring", 4, figures["bytes"], figures["alpha"], figures["beta"])
    print(
        f"ping-pong n1-n2: alpha {figures['alpha'] * 1e6:.0f} us, "
        f"{1e-6 / figures['beta']:.0f} MB/s; Allreduce of {figures['bytes']} bytes on 4 ranks: "
        f"ring model {predicted * 1e3:.1f} ms, measured {figures['allreduce_s'] * 1e3:.1f} ms"
    )
    assert 0 < predicted < figures["allreduce_s"]

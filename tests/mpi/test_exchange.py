"""The MPI layer on real ranks."""

import os
from pathlib import Path

import pytest
from helpers import mpi_python

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_weighted_allreduce_allgather_and_broadcast(ranks):
    result = mpi_python(ranks, Path(__file__).with_name("exchange_check.py"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok") == ranks


def test_batchnorm_statistics_are_averaged_over_ranks():
    result = mpi_python(2, Path(__file__).with_name("state_check.py"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count(" ok") == 2


def test_dynamic_batch_takes_a_name_a_spec_or_a_policy():
    result = mpi_python(2, Path(__file__).with_name("policy_forms.py"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count(" ok") == 2


@pytest.mark.parametrize("pinning", ["one-core", "none"])
def test_early_ranks_sleep_only_where_ranks_outnumber_their_cores(pinning):
    result = mpi_python(2, Path(__file__).with_name("wait_mode.py"), pinning)
    assert result.returncode == 0, result.stderr[-2000:]
    shared = pinning == "one-core" or len(os.sched_getaffinity(0)) < 2
    assert result.stdout.count(" ok, sleeps" if shared else " ok, spins") == 2, result.stdout

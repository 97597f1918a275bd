"""Shared fixtures, made once per session: small staged datasets, the tiny pipeline run locally."""

import pytest
from helpers import dynalloc, snakemake


@pytest.fixture(scope="session")
def digits(tmp_path_factory):
    """scikit-learn's 8x8 digits, staged once per test session."""
    out = tmp_path_factory.mktemp("data") / "digits"
    result = dynalloc("stage", "--source", "digits", "--out", out)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def tiny_pipeline(tmp_path_factory):
    """The results directory of tests/workflow/tiny.yaml run locally (the default profile)."""
    results = tmp_path_factory.mktemp("pipeline") / "results"
    run = snakemake(results=results)
    assert run.returncode == 0, run.stderr[-3000:]
    return results

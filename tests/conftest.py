"""Shared fixtures, made once per session: small staged datasets, the tiny pipeline run locally."""

import pytest
from helpers import dynalloc, snakemake, write_image_recordio


@pytest.fixture(scope="session")
def digits(tmp_path_factory):
    """scikit-learn's 8x8 digits, staged once per test session."""
    out = tmp_path_factory.mktemp("data") / "digits"
    result = dynalloc("stage", "--source", "digits", "--out", out)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def streamed_digits(tmp_path_factory):
    """900 of those digits as JPEGs of 16, 20 and 24 pixels in a RecordIO pair, staged to be
    streamed (the images stay in the .rec) once per test session."""
    folder = tmp_path_factory.mktemp("recordio")
    rec = write_image_recordio(folder / "digits.rec", 900)
    out = folder / "staged"
    result = dynalloc("stage", "--source", "recordio", "--path", rec, "--out", out)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def tiny_pipeline(tmp_path_factory):
    """The results directory of tests/workflow/tiny.yaml run locally (the default profile)."""
    results = tmp_path_factory.mktemp("pipeline") / "results"
    run = snakemake(results=results)
    assert run.returncode == 0, run.stderr[-3000:]
    return results

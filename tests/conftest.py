"""Shared fixtures: small staged datasets, made once per session."""

import pytest
from helpers import dynalloc


@pytest.fixture(scope="session")
def digits(tmp_path_factory):
    """scikit-learn's 8x8 digits, staged once per test session."""
    out = tmp_path_factory.mktemp("data") / "digits"
    result = dynalloc("stage", "--source", "digits", "--out", out)
    assert result.returncode == 0, result.stderr
    return out

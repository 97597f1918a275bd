"""How BENCHMARKS.md judges a target: on plain ratios, one run's or several seeds'."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "report.py"
spec = importlib.util.spec_from_file_location("bench_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


@pytest.mark.parametrize(
    ("ratios", "met"),
    [
        ([1.02, 0.97, 1.001], "yes"),  # the median meets it, whatever one seed says
        ([0.99, 0.97, 1.003], "*within noise*"),  # below on the median, one seed met it
        ([0.99, 0.97, 0.999], "**no**"),  # behind in every seed
    ],
)
def test_repeated_ratios_are_judged_on_their_median(ratios, met):
    measured, verdict = report.verdict(ratios, 1.0, 0.05, "controller")
    assert verdict == met
    assert measured.startswith(f"median {sorted(ratios)[1]:.3f}× `controller` over 3 seeds")


@pytest.mark.parametrize(
    ("ratio", "met"), [(1.0, "yes"), (0.97, "*within noise*"), (0.94, "**no**")]
)
def test_a_single_ratio_is_judged_by_the_noise_band(ratio, met):
    measured, verdict = report.verdict([ratio], 1.0, 0.05, "static")
    assert (measured, verdict) == (f"{ratio:.3f}× `static`", met)

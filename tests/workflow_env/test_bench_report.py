"""How BENCHMARKS.md judges a target: on plain ratios, one run's or several seeds'."""

import importlib.util
import subprocess
import sys
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


def run_report(tmp_path, *args):
    figures = tmp_path / "figures"
    return subprocess.run(
        [sys.executable, SCRIPT, "--out", tmp_path / "B.md", "--figures", figures, *args],
        cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_missing_results_are_named_in_one_line_and_nothing_is_written(tmp_path):
    (tmp_path / "discussion.md").write_text("text\n")
    none = tmp_path / "none"
    done = run_report(tmp_path, "--results", none, "--discussion", tmp_path / "discussion.md")
    assert done.returncode != 0
    expected = f"error: {none / 'summary.csv'} is missing: run the bench that writes {none}"
    assert done.stderr.strip() == expected
    assert not (tmp_path / "B.md").exists() and not (tmp_path / "figures").exists()


def test_a_discussion_citing_the_repeats_without_them_is_refused_before_any_figure(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    rows = [
        f"fashion-mnist-lenet-{p}-homogeneous-r2-s0,fashion-mnist,homogeneous,lenet,{p},2,0,"
        f"512,118,40,{sps},0.03,0.05,0.86,40,"
        for p, sps in (("static", 1500), ("adaptive", 1490))
    ]
    (results / "summary.csv").write_text(
        "run,dataset,scenario,model,policy,ranks,seed,global_batch,iterations,wall_s,"
        "samples_per_s,mean_wait_fraction,max_wait_fraction,final_test_accuracy,"
        "time_to_target_s,iterations_until_balanced\n" + "\n".join(rows) + "\n"
    )
    (results / "speedup.csv").write_text("run,speedup\n")
    (tmp_path / "d.md").write_text("{paired[homogeneous][static]:.3f}\n")
    done = run_report(tmp_path, "--results", results, "--discussion", tmp_path / "d.md")
    assert done.returncode != 0
    assert done.stderr.strip() == (
        "error: the discussion cites 'paired', which these results lack (--repeats?)"
    )
    assert not (tmp_path / "B.md").exists() and not (tmp_path / "figures").exists()

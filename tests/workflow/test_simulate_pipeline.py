"""The planner in the pipeline, for real: the config's `simulate` section run by snakemake
(`rules/simulate.smk`), its rows, figures and report items; bad sections and cluster files
refused with one line naming the key."""

import re

import pytest
import yaml
from helpers import ROOT, SNAKEMAKE, read_rows, snakemake

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow")

SECTION = {
    "clusters": ["config/clusters/example.yaml"],
    "policies": ["static", "adaptive"],
    "iterations": 40,
    "sizes": [1, 2],
    "heterogeneity": [0, 1],
}
OUTPUTS = ["simulate.csv", "simulate.html", "simulate_size.png", "simulate_heterogeneity.png"]


def plan(results, section=SECTION, *args):
    targets = [results / "simulate" / name for name in OUTPUTS]
    return snakemake(*targets, *args, results=results, override={"simulate": section})


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    results = tmp_path_factory.mktemp("plan") / "results"
    run = plan(results)
    assert run.returncode == 0, run.stderr[-3000:]
    report = plan(results, SECTION, "--report", results / "report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    return results


def test_a_plan_is_one_snakemake_away(planned):
    rows = read_rows(planned / "simulate" / "simulate.csv")
    points = [("cluster", 1), ("size", 1), ("size", 2), ("heterogeneity", 0), ("heterogeneity", 1)]
    assert [(r["sweep"], float(r["value"])) for r in rows[::3]] == points
    assert [r["policy"] for r in rows[:3]] == ["static", "adaptive", "optimum"]
    assert [int(r["ranks"]) for r in rows[::3]] == [64, 64, 128, 64, 64]
    assert all(float(r["vs_optimum"]) == 1.0 for r in rows if r["policy"] == "optimum")
    assert all(int(r["iterations"]) == 40 for r in rows)
    for name in OUTPUTS[2:]:
        assert (planned / "simulate" / name).read_bytes().startswith(b"\x89PNG"), name
    page = (planned / "simulate" / "simulate.html").read_text()
    assert page.count("<tr") == len(rows) + 1


def test_the_report_has_a_planner_category(planned):
    report = (planned / "report.html").read_text()
    for label in (
        "the projected rows",
        "speedup against cluster size",
        "speedup against heterogeneity",
    ):
        assert f"Planner: {label}" in report, label
    assert re.search(r"filename=simulate\.html;base64,", report)


def test_a_second_run_has_nothing_to_do(planned):
    again = plan(planned, SECTION, "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_a_bad_section_is_refused_before_anything_runs(tmp_path):
    for section, words in (
        ({**SECTION, "colour": "red"}, "colour"),
        ({**SECTION, "policies": ["oracle"]}, "oracle"),
        ({**SECTION, "sizes": [0]}, "config key 'simulate.sizes.0': 0 is less than or equal"),
    ):
        result = plan(tmp_path / "results", section, "-n")
        assert result.returncode != 0 and words in result.stdout + result.stderr, words


def test_a_bad_cluster_file_fails_its_job_with_one_line(tmp_path):
    spec = yaml.safe_load((ROOT / SECTION["clusters"][0]).read_text())
    spec["groups"][1]["count"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(spec))
    results = tmp_path / "results"
    result = plan(results, {**SECTION, "clusters": [str(bad)]})
    assert result.returncode != 0
    log = (results / "logs" / "simulate.log").read_text().strip().splitlines()
    assert log == [
        f"dynalloc simulate: error: cluster file {bad}: groups[1] (v100).count must be an "
        "integer >= 1, got 0"
    ]
    assert not (results / "simulate" / "simulate.csv").exists()

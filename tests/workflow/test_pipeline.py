"""The Snakemake pipeline, run for real: the workflow env's snakemake, real mpiexec ranks."""

import base64
import csv
import json
import re
import subprocess

import pytest
import yaml
from helpers import ROOT, SNAKEMAKE, read_rows, snakemake

RUNS = ["digits-mlp-adaptive-slowdown-1-3-r2-s0", "digits-mlp-static-slowdown-1-3-r2-s0"]
PLOTS = ["shares", "timing", "convergence", "throughput"]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]


def planned_jobs(output):
    """{rule: count} from the job stats table of a dry run."""
    jobs, table = {}, False
    for line in output.splitlines():
        if line.startswith("job "):
            table = True
        elif table and line.strip() and not line.startswith("-"):
            name, count = line.split()[:2]
            if name == "total":
                break
            jobs[name] = int(count)
    return jobs


@pytest.fixture(scope="module")
def finished(tiny_pipeline):
    report = snakemake("--report", tiny_pipeline / "report.html", results=tiny_pipeline)
    assert report.returncode == 0, report.stderr[-3000:]
    return tiny_pipeline


def test_lint_and_format_are_clean():
    lint = snakemake("--lint", configfile=None)
    assert lint.returncode == 0 and "Congratulations" in lint.stdout + lint.stderr, lint.stderr
    fmt = subprocess.run(
        [str(SNAKEMAKE.with_name("snakefmt")), "--check", "workflow/Snakefile", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stderr


OVERLAYS = {"bench-repeats.yaml": "bench.yaml"}  # read over another, as `make bench-repeats` does


@pytest.mark.parametrize("config", sorted((ROOT / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_dry_runs(config, tmp_path):
    if config.name in OVERLAYS:
        base, overlay = ROOT / "config" / OVERLAYS[config.name], yaml.safe_load(config.read_text())
        result = snakemake("-n", configfile=base, override=overlay, results=tmp_path / "results")
    else:
        result = snakemake("-n", configfile=config, results=tmp_path / "results")
    assert result.returncode == 0, result.stderr[-3000:]
    assert planned_jobs(result.stdout)["train"] >= 1


def test_every_run_logs_every_rank_and_iteration(finished):
    for run in RUNS:
        train = finished / "runs" / run / "train"
        config = yaml.safe_load((finished / "runs" / run / "run.yaml").read_text())
        assert config["labels"]["run"] == run
        with open(train / "iterations.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 2 * 12
        shares = {}
        for row in rows:
            shares.setdefault(row["iteration"], []).append(int(row["batch_size"]))
        assert len(shares) == 12 and all(sum(s) == 64 for s in shares.values())
        assert json.loads((train / "metrics.json").read_text())["iterations"] == 12


def test_tables_plots_and_report(finished):
    with open(finished / "summary.csv", newline="") as handle:
        summary = list(csv.DictReader(handle))
    assert sorted(row["run"] for row in summary) == RUNS
    with open(finished / "speedup.csv", newline="") as handle:
        speedup = {row["policy"]: float(row["speedup"]) for row in csv.DictReader(handle)}
    assert speedup["static"] == 1.0 and 0 < speedup["adaptive"] < 100  # too tiny to rank them
    for name in PLOTS:
        data = (finished / "plots" / f"{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, name
    with open(finished / "replay.csv", newline="") as handle:
        replay = list(csv.DictReader(handle))
    assert sorted({row["run"] for row in replay}) == RUNS and len(replay) == 2 * 5
    for run in RUNS:  # each run's fastest policy first, at 1
        assert float(next(r for r in replay if r["run"] == run)["vs_fastest"]) == 1.0
    report = (finished / "report.html").read_text()
    for name in [*PLOTS, "summary", "speedup", "replay"]:
        assert name in report, name


def embedded(report, name):
    """The file `name` as the report embeds it (a base64 data URI)."""
    found = re.search(
        rf'"data:[^;"]+;charset=utf8;filename={re.escape(name)};base64,([^"]+)"', report
    )
    assert found, name
    return base64.b64decode(found.group(1))


def test_report_opens_on_the_workflow_description_and_shows_the_tables(finished):
    report = (finished / "report.html").read_text()
    description = json.loads(re.search(r'workflow_desc = ("(?:[^"\\]|\\.)*")', report).group(1))
    assert "<h1" in description and "dynalloc report" in description
    for text in ("static", "adaptive", "slowdown-1-3", "global batch of 64", "12 iterations"):
        assert text in description, text
    assert "How to read it" in description and "showCategory" in description  # its links
    # every table as an HTML page in the report, with every run and its numbers in it
    for name in ("summary", "speedup", "replay"):
        page = embedded(report, f"{name}.html").decode()
        rows = read_rows(finished / f"{name}.csv")
        assert page.count("<tr") == len(rows) + 1, name  # the header and a row per CSV row
        for row in rows:
            assert f"<td>{row['run']}</td>" in page, name
    page = embedded(report, "speedup.html").decode()
    for row in read_rows(finished / "speedup.csv"):
        assert f'<td class="num">{float(row["speedup"]):.3g}</td>' in page
    assert embedded(report, "summary.csv").startswith(b"run,")  # still there to download
    for name in PLOTS:
        assert embedded(report, f"{name}.png").startswith(b"\x89PNG"), name


def test_second_run_has_nothing_to_do(finished):
    again = snakemake("-n", results=finished)
    assert again.returncode == 0, again.stderr
    assert "Nothing to be done" in again.stdout + again.stderr


def test_changing_one_policy_parameter_reruns_only_its_run(finished):
    override = {"policies": {"static": {}, "adaptive": {"dead_band": 0.05}}}
    plan = snakemake("-n", results=finished, override=override)
    assert plan.returncode == 0, plan.stderr
    jobs = planned_jobs(plan.stdout)
    assert jobs["train"] == 1 and jobs["run_config"] == 1 and jobs["compare_runs"] == 1, jobs
    assert jobs["replay_runs"] == 1, jobs
    train_block = plan.stdout.split("rule train:", 1)[1].split("\n\n", 1)[0]
    assert "digits-mlp-adaptive" in train_block and "digits-mlp-static" not in train_block


def test_runs_compared_with_each_other_are_trained_one_after_another(tmp_path):
    """The grid's product puts policy before scenario; the scheduler still trains each
    scenario's runs back to back (grid.compared_together), so drift hits a comparison least."""
    override = {
        "scenarios": {"slowdown-1-3": {"slowdown": {1: 3}}, "flat": {}},
        "grid": {"scenario": ["slowdown-1-3", "flat"]},
        "training": {"iterations": 3},
    }
    result = snakemake("--until", "train", results=tmp_path / "results", override=override)
    assert result.returncode == 0, result.stderr[-3000:]
    started, rule = [], None
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
        elif rule == "train" and "wildcards: run=" in line:
            started.append(line.split("run=")[1].strip())
    assert started == [
        f"digits-mlp-{policy}-{scenario}-r2-s0"
        for scenario in ("slowdown-1-3", "flat")
        for policy in ("static", "adaptive")
    ]

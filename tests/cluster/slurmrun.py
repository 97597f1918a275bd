"""Snakemake through a SLURM profile on the tests' cluster (conftest.py), and what the tests read
back from it: the jobs it submitted, the shapes of CSV files, final parameters."""

import csv
import re
import subprocess

import numpy as np
import yaml
from conftest import CLUSTER_ENV
from helpers import ROOT, parameters, snakemake, start_snakemake

PROFILE = ROOT / "workflow" / "profiles" / "slurm"
# The profile's TEST keys: squeue, as this cluster has no accounting database; quick polling.
NO_ACCOUNTING = [
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "1",
]


def on_slurm(results, *args, profile=PROFILE, **kwargs):
    """Snakemake through a SLURM profile; the SLURM logs go beside `results`."""
    return snakemake(
        *profile_args(results, profile), *args, results=results, env=CLUSTER_ENV, **kwargs
    )


def start_on_slurm(results, *args, profile=PROFILE, **kwargs):
    """on_slurm in the background, in a session of its own; its output goes to
    `results`/../snakemake.out."""
    with open(results.parent / "snakemake.out", "w") as output:
        return start_snakemake(
            *profile_args(results, profile), *args, results=results, output=output,
            env=CLUSTER_ENV, **kwargs,
        )  # fmt: skip


def profile_args(results, profile):
    logs = results.parent / "slurm-logs"
    return ["--workflow-profile", profile, *NO_ACCOUNTING, "--slurm-logdir", logs]


def profile_with(folder, **train):
    """A copy of the shipped profile in `folder` whose train rule has the given resources."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    profile["set-resources"]["train"].update(train)
    (folder / "profile").mkdir()
    (folder / "profile" / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder / "profile"


def output(run):
    return run.stdout + run.stderr


def sbatch_jobs(text, fields="%T|%C"):
    """{rule: [(state, cpus), ...] in submission order} of the SLURM jobs of the snakemake run
    whose output is `text` (or the squeue `fields` given, numbers as ints)."""
    run_id = re.search(r"SLURM run ID: (\S+)", text).group(1)
    squeue = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--name", run_id, f"--format=%i|%k|{fields}"],
        capture_output=True,
        text=True,
        check=True,
    )
    jobs = {}
    for line in sorted(squeue.stdout.splitlines(), key=lambda line: int(line.split("|")[0])):
        _, comment, *values = line.split("|")  # comment: rule_<rule>[_wildcards_<values>]
        rule = comment.removeprefix("rule_").split("_wildcards_")[0]
        jobs.setdefault(rule, []).append(tuple(int(v) if v.isdigit() else v for v in values))
    return jobs


def shape(path):
    """(header, number of rows) of a CSV file."""
    with open(path, newline="") as handle:
        header, *rows = csv.reader(handle)
    return header, len(rows)


def max_difference(run_dir, reference_dir):
    """The largest absolute difference between two runs' final parameters."""
    got, want = parameters(run_dir), parameters(reference_dir)
    assert got.keys() == want.keys()
    return max(float(np.abs(got[name] - want[name]).max()) for name in want)

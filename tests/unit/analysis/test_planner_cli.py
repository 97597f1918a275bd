"""`dynalloc simulate` on cluster files: its rows, pages and plots, and exit code 2 with one line
naming the file, key or flag for every bad input (nothing written then)."""

import pandas as pd
import pytest
import yaml
from dynalloc.cli import main
from helpers import ROOT

EXAMPLE = ROOT / "config" / "clusters" / "example.yaml"


def simulate(*argv):
    return main(["simulate", *map(str, argv)])


def test_rows_page_and_plots(tmp_path, capsys):
    out, page, plots = tmp_path / "plan.csv", tmp_path / "plan.html", tmp_path / "plots"
    sweeps = ["--sizes", 2, "--heterogeneity", 0, "--param", "adaptive.dead_band=0.05"]
    policies = ["--policies", "static", "proportional", "adaptive"]
    files = ["--out", out, "--html", page, "--plots-dir", plots]
    code = simulate(EXAMPLE, "--iterations", 30, *policies, *sweeps, *files)
    assert code == 0
    table = pd.read_csv(out)
    assert len(table) == 3 * 4  # the cluster, one size, one heterogeneity; 3 policies + optimum
    assert table.groupby("sweep")["ranks"].first().to_dict() == {
        "cluster": 64, "heterogeneity": 64, "size": 128,
    }  # fmt: skip
    static = table[table["policy"] == "static"]
    assert (static["speedup"] == 1.0).all()
    flat = table[table["sweep"] == "heterogeneity"].set_index("policy")
    assert flat.loc["optimum", "speedup"] == pytest.approx(1.0, abs=0.01)  # nothing to gain
    assert page.read_text().count("<tr") == len(table) + 1
    assert sorted(p.name for p in plots.iterdir()) == [
        "simulate_heterogeneity.png", "simulate_size.png",
    ]  # fmt: skip
    assert "optimum" in capsys.readouterr().out


def bad_file(tmp_path, text):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give a cluster file, or --fit RUN_DIR"),
        (["missing.yaml"], "cannot read config missing.yaml"),
        ([EXAMPLE, "--save-fit", "x.yaml"], "--save-fit needs --fit RUN_DIR"),
        ([EXAMPLE, "--policies", "oracle"], "oracle needs the speeds in advance"),
        ([EXAMPLE, "--policies", "fastest"], "unknown policy 'fastest'"),
        ([EXAMPLE, "--sizes", "0"], "--sizes 0: must be"),
        ([EXAMPLE, "--heterogeneity", "-1"], "--heterogeneity -1: must be"),
        ([EXAMPLE, "--iterations", "0"], "--iterations must be at least 1"),
        ([EXAMPLE, "--param", "adaptive.speed=2"], "adaptive has no parameter 'speed'"),
        (["--fit", "nowhere"], "nowhere/config.yaml"),
    ],
)
def test_bad_flags_exit_2_with_one_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "plan.csv"
    assert simulate(*argv, "--out", out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_a_bad_cluster_file_is_named_with_its_key(tmp_path, capsys):
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["network"]["algorithm"] = "star"
    path = bad_file(tmp_path, yaml.safe_dump(spec))
    assert simulate(path) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"dynalloc simulate: error: cluster file {path}: network.algorithm 'star' is not one "
        "of ring, tree, recursive_doubling, rabenseifner"
    )
    assert simulate(bad_file(tmp_path, "groups: [")) == 2
    assert "is not valid YAML" in capsys.readouterr().err


def test_a_size_that_outgrows_the_dataset_is_named(tmp_path, capsys):
    spec = yaml.safe_load(EXAMPLE.read_text()) | {"dataset_size": 3000, "iterations": 5}
    assert simulate(bad_file(tmp_path, yaml.safe_dump(spec)), "--sizes", 4) == 2
    err = capsys.readouterr().err
    assert "cluster cluster (size 4)" in err and "8192" in err

"""`dynalloc replay` and `analysis.replay.replay_run`: every policy on the seconds a run
measured."""

import pandas as pd
import pytest
import yaml
from dynalloc.analysis.replay import replay_run
from dynalloc.cli import main
from helpers import make_run

SLOW_RANK_1 = [[0.4, 0.8]] * 8  # equal shares of 8, rank 1 twice as slow per sample


def rows_by_policy(run_dir, **kwargs):
    return {row["policy"]: row for row in replay_run(run_dir, **kwargs)}


def test_balancing_policies_beat_static_on_a_runs_speeds(tmp_path):
    rows = rows_by_policy(make_run(tmp_path, "run", SLOW_RANK_1))
    assert rows["static"]["split_changes"] == 0
    assert rows["static"]["iterations"] == 7  # the warm-up left out
    assert rows["static"]["replayed_s"] == pytest.approx(7 * 0.8)
    for policy in ("proportional", "controller", "adaptive"):
        assert rows[policy]["replayed_s"] < 0.8 * rows["static"]["replayed_s"], policy


def test_dbs_re_divides_where_the_run_crossed_an_epoch(tmp_path):
    """make_run numbers epochs i // 4: the replay hands dbs the boundary, once."""
    rows = rows_by_policy(make_run(tmp_path, "run", SLOW_RANK_1), policies=["dbs"])
    assert rows["dbs"]["split_changes"] == 1


def test_parameters_reach_the_policy(tmp_path):
    run = make_run(tmp_path, "run", SLOW_RANK_1)
    frozen = {"controller": {"dead_band": 0.99}}  # never outside its dead band: never moves
    rows = rows_by_policy(run, policies=["controller"], params=frozen)
    assert rows["controller"]["split_changes"] == 0


def test_the_runs_per_rank_share_bounds_reach_the_replay(tmp_path):
    """The run capped its fast rank 0 at 4 of 8 (a node with less memory): no policy can give
    it more, so none moves from the equal split that static keeps."""
    run = make_run(tmp_path, "run", SLOW_RANK_1)
    config = yaml.safe_load((run / "config.yaml").read_text())
    bounds = {"min_share": [1, 1], "max_share": [4, None]}
    (run / "config.yaml").write_text(yaml.safe_dump({**config, **bounds}))
    for policy, row in rows_by_policy(run).items():
        assert row["split_changes"] == 0, policy
        assert row["replayed_s"] == pytest.approx(7 * 0.8), policy


def test_cli_prints_and_writes_every_policy_per_run(tmp_path, capsys):
    """Two runs of one name (a directory called `train` each): each is its own block, fastest
    first."""
    slower = [[0.4, 1.2]] * 8
    runs = [make_run(tmp_path / p, "train", c) for p, c in (("x", SLOW_RANK_1), ("y", slower))]
    out = tmp_path / "replay.csv"
    argv = ["replay", "--run-dir", *map(str, runs), "--out", str(out), "--new-shape", "0.07"]
    assert main([*argv, "--param", "adaptive.dead_band=0.03"]) == 0
    table = pd.read_csv(out)
    assert len(table) == 10 and set(table["run"]) == {"train"}
    assert table["vs_fastest"].iloc[[0, 5]].tolist() == [1.0, 1.0]
    assert (table["vs_fastest"] >= 1.0).all() and table["vs_fastest"].max() > 1.2
    printed = capsys.readouterr().out
    assert "adaptive" in printed and "vs_fastest" in printed


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--param", "adaptive"], "POLICY.KEY=VALUE"),
        (["--param", "oracle.speeds=[1, 2]"], "not among --policies"),
        (["--param", "adaptive.dead_band=[1"], "no YAML value"),
        (["--param", "adaptive.dead_band=2"], "dead_band"),
        (["--param", "adaptive.colour=1"], "colour"),
        (["--policies", "oracle"], "oracle"),
        (["--new-shape", "-0.1"], "--new-shape"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, extra, named):
    run = make_run(tmp_path, "run", SLOW_RANK_1)
    out = tmp_path / "replay.csv"
    assert main(["replay", "--run-dir", str(run), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dynalloc replay: error:") and err.count("\n") == 1, err
    assert named in err and not out.exists()


def test_a_missing_run_is_named(tmp_path, capsys):
    assert main(["replay", "--run-dir", str(tmp_path / "none")]) == 2
    assert "none" in capsys.readouterr().err


def test_a_run_of_only_its_warm_up_is_refused(tmp_path, capsys):
    run = make_run(tmp_path, "run", [[0.4, 0.8]])
    assert main(["replay", "--run-dir", str(run)]) == 2
    assert "no full iteration after the warm-up" in capsys.readouterr().err

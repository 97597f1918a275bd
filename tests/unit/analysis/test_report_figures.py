"""The report as a reader meets it: one colour per policy in every figure, ranks as shades of
their run's colour, the throughput bars' ratios to static, and the tables as HTML pages."""

import re

import numpy as np
import pytest
from dynalloc.cli import main
from helpers import make_run

pd = pytest.importorskip("pandas")
to_hex = pytest.importorskip("matplotlib.colors").to_hex

from dynalloc.analysis import plots  # noqa: E402
from dynalloc.analysis.compare import PAGES, compare, table_page  # noqa: E402
from test_analysis import summary  # noqa: E402

TAB10 = [to_hex(c) for c in pytest.importorskip("matplotlib").colormaps["tab10"].colors]


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plot function saves, instead of their PNG files."""
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    return figures


SUMMARIES = [
    {**summary("static", "slow", 100.0), "mean_wait_fraction": 0.1234567},
    summary("adaptive", "slow", 190.0),
    summary("mine", "slow", 150.0),  # a policy of the user's own: not in POLICY_ORDER
    summary("adaptive", "alone", 50.0),  # no static run to compare with
]


@pytest.fixture
def runs(tmp_path):
    """Run directories of the policies of SUMMARIES, two ranks each."""
    return [
        make_run(
            tmp_path,
            row["run"],
            [[1.0, 2.0]] * 6,
            policy=row["policy"],
            labels={"run": row["run"], "scenario": row["scenario"]},
        )
        for row in SUMMARIES
    ]


def test_each_known_policy_keeps_its_tab10_colour_whatever_else_is_drawn():
    alone = plots.policy_colours(["adaptive"])
    crowded = plots.policy_colours(["zeta", "static", "adaptive", "alpha", "dist_sync"])
    assert alone["adaptive"] == crowded["adaptive"] == TAB10[5]
    assert [crowded[p] for p in plots.POLICY_ORDER] == TAB10[: len(plots.POLICY_ORDER)]
    # other names: the colours after the known ones, in sorted order, none a known one's
    assert crowded["alpha"] == TAB10[7] and crowded["zeta"] == TAB10[8]
    assert crowded == plots.policy_colours(["dist_sync", "alpha", "adaptive", "zeta", "static"])


def test_rank_shades_run_from_dark_to_light_around_the_colour():
    shades = plots.rank_shades(TAB10[0], 3)
    assert len(set(shades)) == 3 and plots.rank_shades(TAB10[0], 1) == [TAB10[0]]
    brightness = [sum(int(s[i : i + 2], 16) for i in (1, 3, 5)) for s in shades]
    assert brightness == sorted(brightness)


def colours_by_policy(figures, runs):
    """{policy: {colours it is drawn in}} over every panel, line and bar of `figures`; a panel
    of the shares or timing (titled by its run) counts as its policy's title colour, and its
    lines are checked to be shades of it."""
    policy_of = {
        ", ".join(filter(None, (r["policy"], r["scenario"]))): r["policy"] for r in SUMMARIES
    }
    seen = {}
    for fig in figures:
        for ax in fig.axes:
            title = ax.get_title()
            if title in policy_of:  # a run's panel
                policy, colour = policy_of[title], to_hex(ax.title.get_color())
                seen.setdefault(policy, set()).add(colour)
                lines = {to_hex(line.get_color()) for line in ax.get_lines()}
                assert lines <= set(plots.rank_shades(colour, 2)), title
                continue
            for line in ax.get_lines():  # convergence: labelled "policy, scenario"
                if line.get_label() in policy_of:
                    policy = policy_of[line.get_label()]
                    seen.setdefault(policy, set()).add(to_hex(line.get_color()))
            for bars in ax.containers:  # throughput: a container per policy
                label = bars.get_label()
                seen.setdefault(label, set()).update(to_hex(b.get_facecolor()) for b in bars)
    return seen


def test_a_policy_has_one_colour_in_every_figure(runs, drawn):
    table, speedup = compare(SUMMARIES)
    plots.plot_shares(runs, None)
    plots.plot_timing(runs, None)
    plots.plot_convergence(runs, None)
    plots.plot_throughput(table, None, speedup)
    plots.plot_rank_share(runs[:3], 1, None, "one rank")
    plots.plot_scenario_throughput(table[table["scenario"] == "slow"], None, "bench")
    seen = colours_by_policy(drawn, runs)
    expected = plots.policy_colours(["mine"])
    assert seen == {p: {expected[p]} for p in ("static", "adaptive", "mine")}
    # and the rank share's lines, one per run, named by their policy
    (ax,) = drawn[4].axes
    assert {line.get_label(): to_hex(line.get_color()) for line in ax.get_lines()} == {
        p: expected[p] for p in ("static", "adaptive", "mine")
    }


def test_no_rank_is_drawn_in_the_colour_of_another_policy(runs, drawn):
    plots.plot_shares(runs, None)
    plots.plot_timing(runs, None)
    policy_colours = set(plots.policy_colours(["mine"]).values())
    for fig in drawn:
        for ax in fig.axes:
            own = to_hex(ax.title.get_color())
            for line in ax.get_lines():
                assert to_hex(line.get_color()) not in policy_colours - {own}, ax.get_title()
    # two ranks of one run differ in shade and, in the shares, in line style too
    shares = drawn[0].axes[0].get_lines()
    assert shares[0].get_color() != shares[1].get_color()
    assert shares[0].get_linestyle() != shares[1].get_linestyle()


def test_the_throughput_bars_carry_their_ratio_to_static(drawn):
    table, speedup = compare([*SUMMARIES, summary("adaptive", "slow", 210.0, seed=1),
                              summary("static", "slow", 100.0, seed=1)])  # fmt: skip
    plots.plot_throughput(table, None, speedup)
    (ax,) = drawn[0].axes
    texts = [t.get_text() for t in ax.texts if t.get_text()]
    groups = [t.get_text() for t in ax.get_xticklabels()]
    assert groups == ["alone", "slow"]
    # adaptive: 190 and 210 samples/s over 100 each: mean 200, ratio 2.00; alone: no static
    assert "200\n2.00×" in texts and "100\n1.00×" in texts and "150\n1.50×" in texts
    assert "50" in texts and not [t for t in texts if t.startswith("50\n")]
    assert ax.get_title() == "Throughput by policy (× static of the group)"


def test_throughput_without_the_speedup_table_is_labelled_with_samples_per_s_only(drawn):
    table, _ = compare(SUMMARIES)
    plots.plot_throughput(table, None)
    texts = [t.get_text() for t in drawn[0].axes[0].texts if t.get_text()]
    assert sorted(texts) == ["100", "150", "190", "50"]


def test_a_table_page_shows_every_cell_rounded_with_the_policy_colours():
    table, speedup = compare(SUMMARIES)
    page = table_page(speedup, "speedup", *PAGES["speedup"])
    assert page.startswith("<!DOCTYPE html>") and "<h1>Speedup:" in page
    # the settings every row shares are said once; the scenario, which differs, is a column
    assert "in every one: dataset d, model lenet, ranks 2, seed 0." in page
    assert "<th>scenario</th>" in page and "<th>dataset</th>" not in page
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert len(cells) == len(speedup) * (len(speedup.columns) - 4)
    for run in speedup["run"]:
        assert f"<td>{run}</td>" in page
    assert '<td class="num">1.9</td>' in page and '<td class="num">190</td>' in page
    assert "<th>static_<wbr>samples_<wbr>per_<wbr>s</th>" in page
    colours = plots.policy_colours(["mine"])
    for policy in ("static", "adaptive", "mine"):
        swatch = f'<span class="swatch" style="background:{colours[policy]}"></span>'
        assert f'<td class="policy">{swatch}{policy}</td>' in page
    # the rows of one group (dataset, model, scenario, ranks, seed) in one block each
    assert page.count('<tr class="block">') == 1
    summary_page = table_page(table, "summary", *PAGES["summary"])
    assert '<td class="num">0.123</td>' in summary_page  # 3 significant digits
    assert '<td class="num">3</td>' in summary_page  # an integer stays one
    assert "global_batch 8, iterations 4." in summary_page


def test_a_single_row_keeps_all_its_columns():
    _, speedup = compare(SUMMARIES[:1])
    page = table_page(speedup, "speedup", *PAGES["speedup"])
    assert "in every one" not in page and "<th>dataset</th>" in page


def test_compare_writes_each_table_as_csv_and_as_a_page(tmp_path, runs):
    summaries = []
    for run_dir in runs:
        out = tmp_path / "summaries" / f"{run_dir.name}.json"
        assert main(["summarize", "--run-dir", str(run_dir), "--out", str(out)]) == 0
        summaries.append(str(out))
    replay = tmp_path / "replay.csv"
    pd.DataFrame(
        {"run": ["r", "r"], "policy": ["adaptive", "static"], "vs_fastest": [1.0, 1.4567]}
    ).to_csv(replay, index=False)
    out = tmp_path / "out"
    argv = ["compare", "--summaries", *summaries, "--runs", *map(str, runs)]
    argv += ["--replay", str(replay), "--tables-dir", str(out), "--plots-dir", str(out)]
    assert main(argv) == 0
    for name in ("summary", "speedup", "replay"):
        page = (out / f"{name}.html").read_text()
        assert page.startswith("<!DOCTYPE html>") and f"{name}.csv" in page, name
    assert '<td class="num">1.46</td>' in (out / "replay.html").read_text()
    summary_page = (out / "summary.html").read_text()
    for run in pd.read_csv(out / "summary.csv")["run"]:
        assert f"<td>{run}</td>" in summary_page


def test_a_missing_replay_table_is_one_line(tmp_path, runs, capsys):
    out = tmp_path / "summary.json"
    assert main(["summarize", "--run-dir", str(runs[0]), "--out", str(out)]) == 0
    argv = ["compare", "--summaries", str(out), "--runs", str(runs[0])]
    argv += ["--replay", str(tmp_path / "none.csv")]
    assert main([*argv, "--tables-dir", str(tmp_path), "--plots-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.csv" in err, err


def test_numbers_keep_three_significant_digits_and_whole_numbers_from_100_up():
    page = table_page(pd.DataFrame({"x": [0.000123456, 17.93, 398.19, 12345.6, np.nan]}), "t", "T")
    assert re.findall(r"<td[^>]*>(.*?)</td>", page) == ["0.000123", "17.9", "398", "12346", ""]


def test_panel_titles_name_the_axis_that_tells_runs_apart(tmp_path, drawn):
    """Two runs of one policy and scenario on different models are told apart by the model,
    not by their long run names; identical ones fall back to the name."""
    runs = [
        make_run(tmp_path, name, [[1, 1]] * 3, labels={"scenario": "slow", "model": model})
        for name, model in (("a-run", "lenet"), ("b-run", "resnet18-script"), ("c-run", "lenet"))
    ]
    plots.plot_shares(runs[:2], tmp_path / "shares.png")
    titles = [ax.get_title() for ax in drawn[0].axes]
    assert titles == ["static, slow, lenet", "static, slow, resnet18-script"]
    plots.plot_shares([runs[0], runs[2]], tmp_path / "shares.png")
    assert [ax.get_title() for ax in drawn[1].axes] == [
        "static, slow [a-run]",
        "static, slow [c-run]",
    ]


def test_an_elastic_runs_restart_is_marked_where_its_ranks_changed(tmp_path, drawn):
    """An elastic run lost a rank after iteration 2: rows of 3 ranks, then of 2."""
    run = make_run(tmp_path, "elastic", [[0.1, 0.2, 0.3]] * 5)
    rows = pd.read_csv(run / "iterations.csv")
    rows["ranks"] = 3
    rows = rows[(rows["iteration"] < 3) | (rows["rank"] < 2)]
    rows.loc[rows["iteration"] >= 3, "ranks"] = 2
    rows.to_csv(run / "iterations.csv", index=False)
    plots.plot_shares([run], tmp_path / "shares.png")
    ax = drawn[0].axes[0]
    marks = [line for line in ax.lines if line.get_label() == "restart"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [3, 3]
    assert [text.get_text() for text in ax.texts] == ["3 -> 2 ranks"]
    plots.plot_shares([make_run(tmp_path, "fixed", [[0.1, 0.2]] * 5)], tmp_path / "two.png")
    assert not [line for line in drawn[1].axes[0].lines if line.get_label() == "restart"]

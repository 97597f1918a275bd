"""`dynalloc show`: a results table in the terminal, rounded as the report rounds it."""

import pandas as pd
from dynalloc.analysis.show import text_table
from dynalloc.cli import main


def test_numbers_are_rounded_and_aligned():
    table = pd.DataFrame(
        {
            "policy": ["adaptive", "static"],
            "samples_per_s": [465.548912, 263.9],
            "speedup": [1.7640554604515233, 1.0],
        }
    )
    lines = text_table(table).splitlines()
    assert lines == [
        "policy    samples_per_s  speedup",
        "adaptive            466     1.76",
        "static              264        1",
    ]


def test_chosen_columns_and_a_missing_one(tmp_path, capsys):
    path = tmp_path / "speedup.csv"
    pd.DataFrame({"policy": ["static"], "speedup": [1.0], "run": ["r"]}).to_csv(path, index=False)
    assert main(["show", str(path), "--columns", "policy", "speedup"]) == 0
    assert capsys.readouterr().out.splitlines() == ["policy  speedup", "static        1"]
    assert main(["show", str(path), "--columns", "speed"]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"dynalloc show: error: --columns: {path} has no column 'speed'; its columns: policy, "
        "speedup, run\n"
    )


def test_a_file_that_is_not_a_table_is_one_line(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.csv")]) == 2
    assert capsys.readouterr().err.count("\n") == 1

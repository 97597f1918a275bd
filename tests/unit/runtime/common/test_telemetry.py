"""`runtime.common.telemetry`, `dynalloc.rundir` and `dynalloc.fsutil`: logs that only appear
under their final name once complete, atomic writes, wait fractions and the progress line."""

import csv
import io
import json
import os
import stat

import pytest
from dynalloc.fsutil import atomic_write
from dynalloc.rundir import EPOCH_FIELDS, wait_fractions, write_json
from dynalloc.runtime.common.telemetry import GrowingCSV, Progress

FIELDS = ("iteration", "epoch", "rank", "batch_size", "compute_s", "sync_s", "wait_s")


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_growing_csv_lives_under_partial_until_closed(tmp_path):
    path = tmp_path / "iterations.csv"
    log = GrowingCSV(path, FIELDS)
    partial = tmp_path / "iterations.csv.partial"
    assert log.partial == partial
    assert partial.exists()
    assert not path.exists()
    # Every write is flushed (header included), so a crash keeps the rows written so far.
    log.write([(0, 0, 0, 32, 0.5, 0.01, 0.0), (0, 0, 1, 32, 0.25, 0.01, 0.25)])
    assert not path.exists()
    assert read_csv(partial) == [
        list(FIELDS),
        ["0", "0", "0", "32", "0.5", "0.01", "0.0"],
        ["0", "0", "1", "32", "0.25", "0.01", "0.25"],
    ]
    log.write([])
    log.write([(1, 0, 0, 30, 0.4, 0.02, 0.1)])
    log.close()
    assert path.exists()
    assert not partial.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iterations.csv"]
    rows = read_csv(path)
    assert rows[0] == list(FIELDS)
    assert len(rows) == 4
    assert rows[3] == ["1", "0", "0", "30", "0.4", "0.02", "0.1"]


def test_growing_csv_replaces_an_old_file_only_on_close(tmp_path):
    path = tmp_path / "epochs.csv"
    path.write_text("old\n", encoding="utf-8")
    log = GrowingCSV(path, EPOCH_FIELDS)
    log.write([(0, 1.5, 0.7, 0.6, 0.8)])
    assert path.read_text(encoding="utf-8") == "old\n"
    log.close()
    assert read_csv(path) == [list(EPOCH_FIELDS), ["0", "1.5", "0.7", "0.6", "0.8"]]


def test_growing_csv_left_unclosed_leaves_only_the_partial(tmp_path):
    path = tmp_path / "iterations.csv"
    log = GrowingCSV(path, FIELDS)
    log.write([(0, 0, 0, 1, 1.0, 0.0, 0.0)])
    log.handle.close()  # a crash: nobody calls close()
    assert not path.exists()
    assert len(read_csv(tmp_path / "iterations.csv.partial")) == 2


def test_atomic_write_writes_the_whole_file(tmp_path):
    path = tmp_path / "metrics.json"
    with atomic_write(path) as handle:
        handle.write("hello")
        assert not path.exists()
    assert path.read_text(encoding="utf-8") == "hello"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_atomic_write_gives_the_permissions_open_would_give(tmp_path):
    old = os.umask(0o027)
    try:
        path = tmp_path / "a.txt"
        with atomic_write(path) as handle:
            handle.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_atomic_write_binary_mode(tmp_path):
    path = tmp_path / "blob"
    with atomic_write(path, mode="wb") as handle:
        handle.write(b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_atomic_write_failure_leaves_old_file_and_no_temp(tmp_path, error):
    path = tmp_path / "model.params"
    path.write_text("old contents", encoding="utf-8")
    with pytest.raises(type(error)), atomic_write(path) as handle:
        handle.write("new half-written contents")
        handle.flush()
        raise error
    assert path.read_text(encoding="utf-8") == "old contents"
    assert [p.name for p in tmp_path.iterdir()] == ["model.params"]


def test_atomic_write_failure_without_old_file_leaves_nothing(tmp_path):
    path = tmp_path / "new.json"
    with pytest.raises(ValueError), atomic_write(path) as handle:
        handle.write("{")
        raise ValueError("bad")
    assert list(tmp_path.iterdir()) == []


def test_write_json(tmp_path):
    path = tmp_path / "metrics.json"
    write_json(path, {"b": 1, "a": [1.5, None]})
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == {"a": [1.5, None], "b": 1}
    assert text.endswith("}\n")
    assert text.index('"a"') < text.index('"b"')  # sorted keys
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_write_json_failure_keeps_old_file(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"old": true}\n', encoding="utf-8")
    with pytest.raises(TypeError):
        write_json(path, {"x": object()})
    assert path.read_text(encoding="utf-8") == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def row(iteration, rank, compute, wait):
    # iteration, epoch, rank, batch_size, compute_s, sync_s, wait_s, iteration_s, loss, ...
    return (iteration, 0, rank, 16, compute, 99.0, wait, 123.0, 2.3, 1.0, "static")


def test_wait_fractions_per_rank():
    rows = [
        row(0, 0, 1.0, 0.0),
        row(0, 1, 0.25, 0.75),
        row(0, 2, 0.5, 0.5),
        row(1, 0, 2.0, 0.0),
        row(1, 1, 1.0, 1.0),
        row(1, 2, 2.0, 0.0),
    ]
    fractions = wait_fractions(rows, 3)
    assert fractions == pytest.approx([0.0, 1.75 / 3.0, 0.5 / 3.0], rel=1e-12)
    assert all(isinstance(f, float) for f in fractions)


def test_wait_fractions_ignore_sync_and_iteration_times():
    # Only compute_s and wait_s count, whatever sync_s and iteration_s are.
    rows = [(0, 0, 0, 8, 3.0, 1000.0, 1.0, 5000.0, 0.1, 1.0, "x")]
    assert wait_fractions(rows, 1) == [0.25]


def test_wait_fractions_count_the_wait_for_data_as_busy_time():
    # data_s, the last field, adds to the busy time; rows of older runs lack it.
    with_data = (0, 0, 0, 8, 2.0, 0.0, 1.0, 5.0, 0.1, 1.0, "x", 1.0)
    assert wait_fractions([with_data], 1) == [0.25]
    assert wait_fractions([with_data[:-1]], 1) == [1.0 / 3.0]


def test_wait_fractions_rank_without_rows_or_time_is_zero():
    rows = [row(0, 0, 1.0, 1.0), row(0, 1, 0.0, 0.0)]
    assert wait_fractions(rows, 3) == [0.5, 0.0, 0.0]
    assert wait_fractions([], 2) == [0.0, 0.0]


def test_wait_fractions_accept_rows_read_back_as_strings():
    rows = [("0", "0", "1", "16", "1.0", "0", "3.0"), ("0", "0", "0", "16", "4.0", "0", "0.0")]
    assert wait_fractions(rows, 2) == [0.0, 0.75]


def progress_lines(total, epochs=1):
    stream = io.StringIO()
    progress = Progress(total, epochs, stream=stream)
    assert progress.tty is False
    for i in range(total):
        progress.update(i, i * epochs // total, 10, [6, 4], 1.0 / (i + 1))
    progress.close()
    return stream.getvalue().splitlines(), stream.getvalue()


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (100, list(range(5, 101, 5))),
        (200, list(range(10, 201, 10))),
        (105, [*range(5, 105, 5), 105]),
        (41, [*range(2, 41, 2), 41]),
        (10, list(range(1, 11))),
        (1, [1]),
    ],
)
def test_progress_on_a_non_tty_writes_about_every_5_percent_and_at_the_end(total, expected):
    lines, text = progress_lines(total)
    done = [int(line.split(" iter ")[1].split("/")[0]) for line in lines]
    assert done == expected
    assert all(f"/{total} " in line for line in lines)
    assert "\r" not in text
    assert "\x1b" not in text
    assert text.endswith("\n")


def test_progress_line_contents():
    stream = io.StringIO()
    progress = Progress(4, 2, stream=stream)
    progress.update(0, 0, 512, [300, 212], 2.30258)
    progress.update(1, 0, 512, [310, 202], 1.5)
    progress.update(2, 1, 512, [320, 192], 1.25)
    progress.update(3, 1, 100, [60, 40], 0.123456)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("epoch 1/2 iter 1/4 | ")
    assert lines[0].endswith(" | shares 300 212 | loss 2.3026")
    assert lines[3].startswith("epoch 2/2 iter 4/4 | ")
    assert lines[3].endswith(" | shares 60 40 | loss 0.1235")
    assert " samples/s | " in lines[3]
    assert progress.samples == 512 * 3 + 100


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_tty_rewrites_one_line():
    stream = FakeTTY()
    progress = Progress(3, 1, stream=stream)
    for i in range(3):
        progress.update(i, 0, 4, [2, 2], 0.5)
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 3
    assert text.count("\n") == 1
    assert text.endswith("\x1b[K\n")

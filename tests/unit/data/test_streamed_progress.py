"""`dynalloc.data.progress.Progress`: the progress line of staging's index pass and of `dynalloc
verify`: a line per interval, a last line for a long pass, and nothing for a short one."""

import io

from dynalloc.data import progress as progress_module
from dynalloc.data.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_line_per_interval_and_a_last_line(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    stream = io.StringIO()
    progress = Progress(1000, "indexing set.rec", stream=stream, every=10.0)
    for _ in range(4):
        clock.now += 3.0
        progress.update(100)
    clock.now += 3.0
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines == [
        "indexing set.rec: 400/1,000 (40%), 12.0 s, 33/s",
        "indexing set.rec: 400/1,000 (40%), 15.0 s, 27/s",
    ]


def test_a_pass_shorter_than_the_interval_prints_nothing(monkeypatch):
    """A small dataset's staging, or its bad input, stays one line on stderr."""
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    stream = io.StringIO()
    progress = Progress(3, "indexing train", stream=stream, every=10.0)
    progress.update(3)
    clock.now += 9.9
    progress.close()
    assert stream.getvalue() == ""


def test_a_terminal_is_redrawn_in_place(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress(0, "verifying out", stream=stream)
    assert progress.every == 0.2
    clock.now += 0.5
    progress.update(2)
    clock.now += 0.5
    progress.close()
    assert stream.getvalue() == "verifying out: 2/0, 0.5 s, 4/s\rverifying out: 2/0, 1.0 s, 2/s\n"

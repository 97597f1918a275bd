"""A progress line for long passes (staging's index pass, `dynalloc verify`): count, share done
and items per second on stderr, redrawn in place on a terminal and a line every ten seconds in a
log file, so that a pipeline's log shows the pass moving without a line per record. A pass
shorter than that interval prints nothing: a small dataset's staging, or its bad input, stays
one line."""

import sys
import time


class Progress:
    def __init__(self, total, what, stream=None, every=None):
        self.total, self.what = total, what
        self.stream = sys.stderr if stream is None else stream
        self.tty = self.stream.isatty()
        self.every = every if every is not None else (0.2 if self.tty else 10.0)
        self.done = 0
        self.began = self.shown = time.perf_counter()

    def update(self, count=1):
        self.done += count
        now = time.perf_counter()
        if now - self.shown >= self.every:
            self.shown = now
            self._show(now, end="\r" if self.tty else "\n")

    def close(self):
        """The final line, for a pass that lasted a redraw interval or more: how many, in how
        long, at what rate."""
        now = time.perf_counter()
        if now - self.began >= self.every:
            self._show(now, end="\n")

    def _show(self, now, end):
        elapsed = max(now - self.began, 1e-9)
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        self.stream.write(
            f"{self.what}: {self.done:,}/{self.total:,}{share}, {elapsed:.1f} s, "
            f"{self.done / elapsed:,.0f}/s{end}"
        )
        self.stream.flush()

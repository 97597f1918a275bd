"""`make bench-stream` in small (`--quick`): every section stages and trains for real on the
Fashion-MNIST JPEGs that `make bench-data` writes, and the report holds every figure."""

import re
import subprocess
import sys

import pytest
from helpers import ENV, ROOT

pytestmark = pytest.mark.mpi

DATA = ROOT / "data" / "bench-stream"


def test_the_quick_stream_bench_measures_every_figure(tmp_path):
    assert (DATA / "28x28" / "train.idx").exists(), "make bench-data writes data/bench-stream"
    out = tmp_path / "bench-stream.md"
    command = [sys.executable, ROOT / "benchmarks" / "bench_stream.py", "--quick"]
    command += ["--data", DATA, "--work", tmp_path / "work", "--out", out]
    done = subprocess.run(
        list(map(str, command)), capture_output=True, text=True, timeout=900, env=ENV
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text()
    for section in ("## a.", "## b.", "## c.", "## d.", "## e.", "## Decoding"):
        assert section in report, section
    ratio = re.search(r"streamed / in-memory samples/s \(a\): ([0-9.]+)", report)
    memory = re.search(r"60,000 / 6,000 records \(b\): ([0-9.]+)", report)
    assert ratio and float(ratio.group(1)) > 0 and memory and float(memory.group(1)) > 0

"""`runtime.common.placement`: a rank that shares its node and that nothing pinned gets every
thread of its process pinned to its own cores, as `dynalloc train` pins its ranks."""

import os
import subprocess
import sys

import pytest

CORES = sorted(os.sched_getaffinity(0))


def run_isolated(code, **environment):
    """`code` in a fresh interpreter (its pinning must not stay with the test process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPI_", "PMI_", "OMPI_"))}
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


PLACE = """
import os, threading
from dynalloc.runtime.common.placement import place_process
stop = threading.Event()
worker = threading.Thread(target=stop.wait, daemon=True)   # a framework's, started before
worker.start()
asked = []
placed = place_process(1, 1, asked.append)
masks = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
again = place_process(1, 1, asked.append)
stop.set()
print(placed, sorted(masks), asked, again)
"""


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to pin ranks apart")
def test_every_thread_of_an_unpinned_rank_sharing_its_node_is_pinned():
    out = run_isolated(PLACE, MPI_LOCALNRANKS="2")
    assert out == f"True [({CORES[1]},)] [1] False"


def test_a_rank_alone_on_its_node_is_left_alone():
    out = run_isolated(PLACE)  # no launcher: one rank on the node
    assert out.startswith("False") and out.endswith("[] False")


def test_a_launchers_binding_is_kept():
    code = f"import os; os.sched_setaffinity(0, {{{CORES[0]}}})\n" + PLACE
    out = run_isolated(code, MPI_LOCALNRANKS="2")
    assert out == f"False [({CORES[0]},)] [] False"


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to tell masks apart")
def test_threads_placed_apart_already_are_left_alone():
    """A process whose threads do not all share one mask was placed on purpose."""
    code = PLACE.replace(
        "asked = []",
        f"os.sched_setaffinity(worker.native_id, {{{CORES[0]}}})\nasked = []",
    )
    out = run_isolated(code, MPI_LOCALNRANKS="2")
    assert out.startswith("False") and "[] False" in out

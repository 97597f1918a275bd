"""hold_freed_memory: in a process of its own (malloc's settings are the whole process's), an
iteration that frees ten 1 MiB blocks and allocates them again, as a training loop frees and
allocates its activations, faults their pages in again under glibc's defaults and not once the
thresholds are fixed."""

from helpers import freed_blocks_faults, glibc_only

HOLD = """
import sys
from dynalloc.runtime.common.heap import hold_freed_memory

print(hold_freed_memory() if sys.argv[1] == "hold" else False)
"""


def run(mode, **env):
    (held,), faults = freed_blocks_faults(HOLD, mode, **env)
    return held == "True", faults


@glibc_only
def test_freed_blocks_fault_in_again_each_iteration_under_glibcs_defaults():
    held, faults = run("defaults")
    assert not held
    assert faults >= 1000  # ten 1 MiB blocks: 2,560 pages


@glibc_only
def test_fixed_thresholds_keep_the_freed_blocks_and_their_pages():
    held, faults = run("hold")
    assert held
    assert faults < 50


@glibc_only
def test_the_users_own_malloc_settings_are_left_as_they_are():
    held, faults = run("hold", MALLOC_TRIM_THRESHOLD_="131072")
    assert not held
    assert faults >= 1000

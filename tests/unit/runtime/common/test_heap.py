"""hold_freed_memory: in a process of its own (malloc's settings are the whole process's), an
iteration that frees ten 1 MiB blocks and allocates them again, as a training loop frees and
allocates its activations, faults their pages in again under glibc's defaults and not once the
thresholds are fixed."""

import os
import subprocess
import sys

import pytest

ITERATIONS = """
import ctypes, resource, sys
from dynalloc.runtime.common.heap import hold_freed_memory

held = hold_freed_memory() if sys.argv[1] == "hold" else False
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc((1 << 20) + 4096))  # a mapped block freed: glibc's thresholds slide up
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc((1 << 20) - 4096) for _ in range(10)]
    for block in blocks:
        ctypes.memset(block, 1, (1 << 20) - 4096)
    for block in blocks:
        libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(held, max(faults[1:]))
"""

glibc = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="glibc's malloc only",
)


def run(mode, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    result = subprocess.run(
        [sys.executable, "-c", ITERATIONS, mode], capture_output=True, text=True, timeout=60,
        env={**clean, **env}, check=True,
    )  # fmt: skip
    held, faults = result.stdout.split()
    return held == "True", int(faults)


@glibc
def test_freed_blocks_fault_in_again_each_iteration_under_glibcs_defaults():
    held, faults = run("defaults")
    assert not held
    assert faults >= 1000  # ten 1 MiB blocks: 2,560 pages


@glibc
def test_fixed_thresholds_keep_the_freed_blocks_and_their_pages():
    held, faults = run("hold")
    assert held
    assert faults < 50


@glibc
def test_the_users_own_malloc_settings_are_left_as_they_are():
    held, faults = run("hold", MALLOC_TRIM_THRESHOLD_="131072")
    assert not held
    assert faults >= 1000

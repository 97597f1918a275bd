"""Keep the memory a training loop frees each iteration in the process (glibc's malloc).

glibc hands memory back to the kernel when the free space at the top of its heap passes a
threshold, and maps large blocks on their own and unmaps them when freed. An iteration on a CPU
frees its activations and gradients and allocates them again at once, so where the heap's
layout puts them at its top, the next iteration faults every page in again, zero-filled: up to
thousands of page faults an iteration and 2-3% of a 10-100 ms iteration on this project's
machines, or none, by the luck of what else was allocated (plain DDP's loop and DynamicBatch's
alike; benchmarks/cost_ladder.py counts them). glibc's own thresholds slide up as large blocks
are freed, but not past that luck. Fixed thresholds end it: the process keeps, at most, what its
iterations use anyway, as PyTorch's CUDA caching allocator keeps GPU memory. Settings of the
user's own (glibc's environment variables or tunables) are left as they are.
"""

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters, from glibc's malloc.h
TRIM_THRESHOLD = 1 << 30  # free memory at the heap's top kept, up to 1 GiB
MMAP_THRESHOLD = 32 << 20  # blocks mapped on their own from 32 MiB: glibc's own sliding maximum
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")


def hold_freed_memory():
    """Fix glibc's trim and mmap thresholds for this process, unless the environment sets
    malloc's own; returns whether it did (False where the C library is not glibc)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if any(name in os.environ for name in USER_SETTINGS) or "glibc.malloc." in tunables:
        return False
    libc = ctypes.CDLL(None)  # the C library this process runs on
    if not hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt does nothing; macOS has none
        return False
    # The mmap threshold first: fixing either turns glibc's sliding thresholds off, and the
    # trim threshold alone would leave every block of 128 KiB or more mapped and unmapped.
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

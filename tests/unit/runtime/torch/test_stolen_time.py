"""A DDP rank pinned to one core leaves out of its compute what the threads that Python did not
start took from the backward pass (`hook.ShareWeight.ready`): gloo's threads spin there while
they wait for the other ranks. Its other Python threads (a read-ahead's decoders) stay
counted. On a clock the test drives."""

import threading

import pytest
import torch.distributed as dist
from dynalloc.runtime.torch import hook


class Clock:
    """Wall time, this thread's CPU time, the whole process's, and that of the process's other
    Python threads (a read-ahead's decoders) by native id, advanced by the test."""

    def __init__(self):
        self.now = self.thread = self.process = 0.0
        self.python = {}

    def run(self, wall, thread, others=0.0, python=0.0):
        """`others`: CPU time of threads Python did not start (gloo's); `python`: of thread 7."""
        self.now += wall
        self.thread += thread
        self.process += thread + others + python
        if python:
            self.python[7] = self.python.get(7, 0.0) + python

    def threads(self):
        return [threading.current_thread(), *(Thread(t) for t in self.python)]

    def thread_clock(self, clock):
        for tid, seconds in self.python.items():
            if clock == (~tid << 3) | 6:
                return seconds
        raise OSError(22, "Invalid argument")


class Thread:
    def __init__(self, native_id):
        self.ident = self.native_id = native_id


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(hook.time, "perf_counter", lambda: clock.now)
    monkeypatch.setattr(hook.time, "thread_time", lambda: clock.thread)
    monkeypatch.setattr(hook.time, "process_time", lambda: clock.process)
    monkeypatch.setattr(hook.time, "sleep", lambda seconds: clock.run(seconds, 0.0))
    monkeypatch.setattr(hook.time, "clock_gettime", clock.thread_clock)
    monkeypatch.setattr(hook.threading, "enumerate", clock.threads)
    return clock


@pytest.fixture(scope="module")
def group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def timed(clock, one_core, factor=1.0):
    state = hook.ShareWeight()
    state.one_core = one_core
    state.start(factor)
    clock.run(0.004, 0.004)  # the forward pass and the first bucket's backward
    state.hold()
    clock.run(0.006, 0.002, others=0.004)  # gloo's threads spin for 4 of the next 6 ms
    state.hold()
    state.ready()
    return state


def test_on_one_core_the_other_threads_time_is_not_compute(clock, group):
    assert timed(clock, one_core=True).computed(None) == pytest.approx(0.006)


def test_on_more_cores_the_other_threads_ran_beside_it_and_all_is_compute(clock, group):
    assert timed(clock, one_core=False).computed(None) == pytest.approx(0.010)


def test_what_is_left_out_is_at_most_the_time_the_backward_pass_neither_ran_nor_slept(clock, group):
    """An emulated slowdown sleeps: the other threads' time during the sleep took nothing from
    the compute, which is stretched as the slower device's."""
    state = timed(clock, one_core=True, factor=2.0)
    # 0.004 s held after the first bucket, 0.006 after the second: 0.020 s in all, 0.006 s of
    # it run by the backward pass, 0.010 s slept, so at most 0.004 s taken by the others.
    assert state.slept == pytest.approx(0.010)
    clock.process += 0.005  # the other threads ran during the sleeps too
    state.ready()
    assert state.computed(None) == pytest.approx(0.020 - 0.004)


def test_a_python_threads_time_stays_compute(clock, group):
    """A read-ahead's decoders on the same core slow the rank as much as they decode for it."""
    clock.python[7] = 0.0  # a decoder thread, there from the start
    state = hook.ShareWeight()
    state.one_core = True
    state.start(1.0)
    clock.run(0.010, 0.005, others=0.002, python=0.003)
    state.ready()
    assert state.computed(None) == pytest.approx(0.008)


def test_a_step_without_a_bucket_computed_until_it_ended(clock, group):
    state = hook.ShareWeight()
    state.one_core = True
    assert state.computed(1.0) != state.computed(1.0)  # NaN: no step started it
    state.start(1.0)
    clock.run(0.003, 0.003)
    assert state.computed(clock.now) == pytest.approx(0.003)

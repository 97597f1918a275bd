"""The emulated slowdown of a DDP rank (`hook.SlowBuckets`): each bucket leaves when a device
`factor` times slower would have had it ready, on a clock the test drives."""

import pytest
from dynalloc.runtime.torch import hook


class Clock:
    def __init__(self):
        self.now, self.slept = 0.0, []

    def perf_counter(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(hook.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(hook.time, "sleep", clock.sleep)
    return clock


def test_each_bucket_leaves_at_factor_times_the_time_computed_for_it(clock):
    slow = hook.SlowBuckets()
    slow.start(3.0)
    clock.now += 0.1  # forward and the first bucket's backward
    slow.hold()
    assert clock.now == pytest.approx(0.3)
    clock.now += 0.05  # the second bucket: 0.15 s computed in all
    slow.hold()
    assert clock.now == pytest.approx(0.45)
    slow.hold()  # nothing computed since: nothing more to wait
    assert clock.slept == pytest.approx([0.2, 0.1])


def test_a_rank_at_full_speed_never_waits(clock):
    slow = hook.SlowBuckets()
    slow.hold()  # before any start
    slow.start(1.0)
    clock.now += 0.1
    slow.hold()
    assert clock.slept == []


def test_on_a_gpu_the_time_stretched_is_the_streams_not_the_launches(clock, monkeypatch):
    """DDP calls the hook once the backward pass has queued a bucket's kernels: on a GPU the
    stream is waited for before the clock is read, so the GPU's time is what gets stretched."""
    waited = []

    class Stream:
        def synchronize(self):
            waited.append(clock.now)
            clock.now += 0.1  # the GPU still computing what was queued

    monkeypatch.setattr(hook.torch.cuda, "current_stream", lambda device: Stream())
    slow = hook.SlowBuckets()
    slow.start(3.0)
    clock.now += 0.01  # the launches
    slow.hold(hook.torch.device("cuda", 0))
    assert waited == [pytest.approx(0.01)]
    assert clock.slept == pytest.approx([0.22])  # (3 - 1) x 0.11 s computed
    slow.hold(hook.torch.device("cpu"))  # a bucket on the CPU: nothing to wait for
    assert len(waited) == 1

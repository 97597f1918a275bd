"""`dynalloc.core.cluster`: the cluster file read into a model (config/clusters/example.yaml, the
documented example, among them), its slowdowns over time, resizing and stretching, and one
ValueError naming the key for every bad entry."""

import copy

import numpy as np
import pytest
import yaml
from dynalloc.core.allreduce import allreduce_seconds
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.gradients import gradient_bytes
from helpers import ROOT

EXAMPLE = ROOT / "config" / "clusters" / "example.yaml"

SMALL = {
    "global_batch": 96,
    "iterations": 10,
    "network": {"algorithm": "ring", "latency_s": 1e-5, "seconds_per_byte": 1e-9},
    "gradient": {"bytes": 1000},
    "groups": [
        {"name": "fast", "count": 2, "cost": {"intercept_s": 0.01, "per_sample_s": 0.001}},
        {"name": "slow", "count": 1, "cost": {"table": [[16, 0.05], [32, 0.09]]}, "slowdown": 2},
    ],
    "changes": [{"group": "fast", "factor": 3, "start": 4, "end": 6}],
}


def test_the_documented_example_reads():
    cluster = parse_cluster(yaml.safe_load(EXAMPLE.read_text()))
    assert cluster.ranks == 64
    expected = allreduce_seconds("ring", 64, gradient_bytes("resnet50_v1"), 5e-6, 8e-11)
    assert cluster.exchange_s() == pytest.approx(expected)
    assert cluster.share_bounds()[1][-1] == 64  # the t4's max_share, one entry per rank


def test_ranks_are_laid_out_group_after_group():
    cluster = parse_cluster(SMALL)
    shares = np.array([10, 20, 24])
    assert cluster.seconds(shares) == pytest.approx([0.02, 0.03, 0.07])
    assert cluster.exchange_s() == pytest.approx(4e-5 + 2 / 3 * 2 * 1000 * 1e-9)


def test_slowdowns_follow_the_scenario_semantics():
    cluster = parse_cluster(SMALL)
    assert cluster.factors(3).tolist() == [1.0, 2.0]
    assert cluster.factors(4).tolist() == [3.0, 2.0]  # [start, end)
    assert cluster.factors(6).tolist() == [1.0, 2.0]
    jittered = parse_cluster({**SMALL, "groups": [{**SMALL["groups"][0], "jitter": 0.3}]})
    assert jittered.factors(0).tolist() == [1.3]  # at its mean
    draws = np.array([-1.0, 1.0])  # a draw's extremes: [1, 1 + 2 jitter]
    assert jittered.factors(0, draws) == pytest.approx([1.0, 1.6])


def test_resizing_keeps_each_ranks_share_and_stretching_scales_the_slowness():
    cluster = parse_cluster(SMALL)
    bigger = cluster.resized(4)
    assert [g.count for g in bigger.groups] == [8, 4] and bigger.global_batch == 384
    share = np.array([32.0])
    fast, slow = cluster.groups[0].cost(share)[0], 2 * cluster.groups[1].cost(share)[0]
    for h in (0.0, 1.0, 3.0):
        stretched = cluster.stretched(h)
        times = [
            g.cost(share)[0] * f
            for g, f in zip(stretched.groups, stretched.factors(0), strict=True)
        ]
        assert times[1] / times[0] == pytest.approx(1 + h * (slow / fast - 1))


def test_the_spec_reads_back_as_the_same_cluster():
    cluster = parse_cluster(SMALL)
    assert parse_cluster(cluster.spec()).spec() == cluster.spec()


def test_caps_that_cannot_hold_the_global_batch_are_refused():
    spec = copy.deepcopy(SMALL)
    for group in spec["groups"]:
        group["max_share"] = 30
    with pytest.raises(ValueError, match="global_batch 96 exceeds what the groups' max_share"):
        parse_cluster(spec)


def bad(path, value):
    spec = copy.deepcopy(SMALL)
    *parents, last = path
    target = spec
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return spec


DELETE = object()


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("colour",), "red", "unknown key 'colour'"),
        (("groups",), [], "groups must be a non-empty list"),
        (("global_batch",), 0, "global_batch must be an integer >= 1"),
        (("global_batch",), 2, "smaller than ranks x min_share = 3 x 1"),
        (("iterations",), DELETE, "missing key 'iterations'"),
        (("seed",), -1, "seed must be an integer >= 0"),
        (("overhead_s",), float("nan"), "overhead_s must be a finite number"),
        (("network", "algorithm"), "star", "network.algorithm 'star' is not one of"),
        (("network", "latency_s"), "fast", r"network.latency_s must be a finite number >= 0\.0"),
        (("network",), {"exchange_s": -1}, "network.exchange_s must be a finite number"),
        (("gradient",), DELETE, "gradient is needed"),
        (("gradient",), {"model": "gpt5"}, "unknown model 'gpt5'"),
        (("gradient", "bytes"), 1.5, "gradient.bytes must be an integer"),
        (("groups", 0, "count"), 0, r"groups\[0\] \(fast\).count must be an integer >= 1"),
        (("groups", 0, "noise"), 2, r"groups\[0\] \(fast\).noise must be a finite number"),
        (("groups", 0, "jitter"), 1, r"groups\[0\] \(fast\).jitter must be .* and < 1"),
        (("groups", 0, "slowdown"), 0, r"groups\[0\] \(fast\).slowdown must be .* > 0"),
        (("groups", 0, "speed"), 1, r"groups\[0\]: unknown key 'speed'"),
        (("groups", 1, "name"), "fast", "two groups are named 'fast'"),
        (("groups", 0, "cost"), {"intercept_s": 0.1}, "missing key 'per_sample_s'"),
        (("groups", 0, "cost", "per_sample_s"), 0, r"per_sample_s must be a finite number > 0"),
        (("groups", 1, "cost", "table"), [[16, 0.05]], r"table needs at least two"),
        (("groups", 1, "cost", "table"), [[16, 0.05], [32, 0.01]], r"table seconds must not"),
        (("groups", 1, "cost", "table"), [[16, 0.05], [8]], r"table must be a list of \[batch"),
        (("changes", 0, "group"), "gpu", r"changes\[0\].group 'gpu' names no group"),
        (("changes", 0, "end"), 4, r"changes\[0\].end must be an integer >= 5"),
    ],
)
def test_every_bad_entry_is_named(path, value, message):
    with pytest.raises(ValueError, match=message):
        parse_cluster(bad(path, value))

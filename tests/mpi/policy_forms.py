"""Run under mpiexec: DynamicBatch takes its policy as a name, a run config's spec or a Policy,
a prebuilt sampler, keywords only after global_batch, and names a policy or sampler made for
another run; a warm start from costs given or from a probe of a Gluon forward and backward."""

import sys

import mxnet as mx
from dynalloc.core.partition import GlobalBatchSampler
from dynalloc.core.policies import make_policy
from dynalloc.errors import DynallocError
from dynalloc.runtime.mxnet.gluon import DynamicBatch
from dynalloc.runtime.mxnet.models import build_model
from mxnet import autograd, gluon

net = build_model("mlp", 10, (1, 8, 8), seed=0)
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
params = net.collect_params()

by_name = DynamicBatch(params, trainer, 64, 32, policy="controller")
assert by_name.policy.name == "controller" and by_name.policy.dead_band == 0.05
by_spec = DynamicBatch(params, trainer, 64, 32, policy={"name": "controller", "dead_band": 0.2})
assert by_spec.policy.dead_band == 0.2
mine = make_policy({"name": "static"}, 2, 32)
sampler = GlobalBatchSampler(64, 32, seed=3, ranks=2)
given = DynamicBatch(params, trainer, 64, 32, policy=mine, sampler=sampler)
assert given.policy is mine and given.sampler is sampler
for wrong, words in (
    ({"policy": make_policy("static", 3, 32)}, "made for 3 ranks"),
    ({"sampler": GlobalBatchSampler(128, 32, seed=0)}, "made for 128 samples"),
    ({"policy": {"name": "adaptive", "gain": 1}}, "gain"),
    ({"policy": {"name": "static", "warm_start": "probe"}}, "policy 'static' models no costs"),
):
    try:
        DynamicBatch(params, trainer, 64, 32, **wrong)
    except DynallocError as error:
        assert words in str(error), error
    else:
        raise AssertionError(f"{wrong} was accepted")
try:
    DynamicBatch(params, trainer, 64, 32, "static")
except TypeError:
    pass
else:
    raise AssertionError("a positional policy was accepted")
costs = {"intercept_s": [0.01, 0.02], "per_sample_s": [0.001, 0.003]}
warm = DynamicBatch(params, trainer, 64, 32, policy={"name": "adaptive", "warm_start": costs})
assert warm.shares.tolist() == [27, 5], warm.shares  # min-max of those costs, not [16, 16]
probed = DynamicBatch(params, trainer, 64, 32, policy={"name": "adaptive", "warm_start": "probe"})
try:
    next(probed.epoch(0))
except DynallocError as error:
    assert "call probe(forward_backward) before the first step" in str(error), error
else:
    raise AssertionError("a run waiting for its probe took a step")
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
before = [p.data().asnumpy().copy() for p in params.values()]


def forward_backward(n):
    with autograd.record():
        loss = loss_fn(net(mx.nd.ones((n, 1, 8, 8))), mx.nd.zeros(n))
    loss.backward()


assert probed.probe(forward_backward) > 0 and probed.policy.models.complete
after = [p.data().asnumpy() for p in params.values()]
assert all((a == b).all() for a, b in zip(before, after, strict=True))  # nothing trained
print(f"rank {by_name.rank} ok")
sys.exit(0)

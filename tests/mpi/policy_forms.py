"""Run under mpiexec: DynamicBatch takes its policy as a name, a run config's spec or a Policy,
a prebuilt sampler, keywords only after global_batch, and names a policy or sampler made for
another run."""

import sys

from dynalloc.core.partition import GlobalBatchSampler
from dynalloc.core.policies import make_policy
from dynalloc.errors import DynallocError
from dynalloc.runtime.mxnet.gluon import DynamicBatch
from dynalloc.runtime.mxnet.models import build_model
from mxnet import gluon

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
print(f"rank {by_name.rank} ok")
sys.exit(0)

"""build_optimizer: optimizer classes and settings, schedules, and key-by-key validation."""

import math

import pytest

mx = pytest.importorskip("mxnet")

from dynalloc.errors import DynallocError  # noqa: E402
from dynalloc.runtime.mxnet.optim import build_optimizer  # noqa: E402


def lr_at(optimizer, num_update):
    """The rate the optimizer uses for its `num_update`-th update (call in increasing order)."""
    optimizer.num_update = num_update
    return optimizer.learning_rate


def test_sgd_settings_and_defaults():
    opt = build_optimizer({"name": "sgd", "lr": 0.1, "momentum": 0.5, "wd": 1e-4}, 100)
    assert type(opt) is mx.optimizer.SGD
    assert (opt.learning_rate, opt.momentum, opt.wd) == (0.1, 0.5, 1e-4)
    assert opt.rescale_grad == 1.0
    assert opt.lr_scheduler is None
    default = build_optimizer({"name": "sgd", "lr": 1}, 100)
    assert (default.learning_rate, default.momentum, default.wd) == (1.0, 0.9, 0.0)


def test_adam_settings():
    opt = build_optimizer({"name": "adam", "lr": 0.003, "wd": 0.01}, 100)
    assert type(opt) is mx.optimizer.Adam
    assert (opt.learning_rate, opt.wd, opt.rescale_grad) == (0.003, 0.01, 1.0)


def test_none_schedule_keeps_the_rate():
    opt = build_optimizer({"name": "sgd", "lr": 0.1, "schedule": {"name": "none"}}, 100)
    assert opt.lr_scheduler is None
    assert lr_at(opt, 99) == 0.1


def test_step_schedule_scales_after_every_updates():
    spec = {"name": "sgd", "lr": 0.2, "schedule": {"name": "step", "every": 5, "factor": 0.5}}
    opt = build_optimizer(spec, 100)
    assert isinstance(opt.lr_scheduler, mx.lr_scheduler.FactorScheduler)
    assert [lr_at(opt, n) for n in (1, 5, 6, 10, 11)] == [0.2, 0.2, 0.1, 0.1, 0.05]


def test_schedule_advances_once_per_trainer_step():
    spec = {"name": "sgd", "lr": 0.2, "schedule": {"name": "step", "every": 2, "factor": 0.5}}
    opt = build_optimizer(spec, 100)
    net = mx.gluon.nn.Dense(3, in_units=4)  # two parameters, still one update per step
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), opt)
    for _ in range(3):
        with mx.autograd.record():
            loss = net(mx.nd.ones((2, 4))).sum()
        loss.backward()
        trainer.step(1)
    assert opt.num_update == 3
    assert trainer.learning_rate == pytest.approx(0.1)


def test_cosine_decays_to_final_lr_at_total_iterations():
    spec = {"name": "adam", "lr": 0.1, "schedule": {"name": "cosine", "final_lr": 0.01}}
    opt = build_optimizer(spec, 100)
    assert isinstance(opt.lr_scheduler, mx.lr_scheduler.CosineScheduler)
    assert lr_at(opt, 0) == pytest.approx(0.1)
    assert lr_at(opt, 50) == pytest.approx(0.055)
    assert lr_at(opt, 100) == pytest.approx(0.01)
    assert lr_at(opt, 150) == pytest.approx(0.01)


def test_cosine_warmup_then_decay_to_zero_by_default():
    spec = {"name": "sgd", "lr": 0.1, "schedule": {"name": "cosine", "warmup": 10}}
    opt = build_optimizer(spec, 110)
    assert lr_at(opt, 5) == pytest.approx(0.05)
    assert lr_at(opt, 10) == pytest.approx(0.1)
    assert lr_at(opt, 60) == pytest.approx(0.05)
    assert lr_at(opt, 110) == pytest.approx(0.0)


def sgd(**changes):
    return {"name": "sgd", "lr": 0.1} | changes


def step(**changes):
    return sgd(schedule={"name": "step", "every": 10, "factor": 0.5} | changes)


def cosine(**changes):
    return sgd(schedule={"name": "cosine"} | changes)


@pytest.mark.parametrize(
    ("spec", "key", "value"),
    [
        ([("name", "sgd")], "optimizer", "[('name', 'sgd')]"),
        ({"lr": 0.1}, "optimizer.name", "sgd, adam"),
        (sgd(name="rmsprop"), "optimizer.name", "'rmsprop'"),
        (sgd(lrate=0.1), "optimizer.lrate", "0.1"),
        ({"name": "adam", "lr": 0.1, "momentum": 0.9}, "optimizer.momentum", "0.9"),
        ({"name": "sgd"}, "optimizer.lr", "required"),
        (sgd(lr=0), "optimizer.lr", "got 0"),
        (sgd(lr=-0.1), "optimizer.lr", "-0.1"),
        (sgd(lr="0.1"), "optimizer.lr", "'0.1'"),
        (sgd(lr=True), "optimizer.lr", "True"),
        (sgd(lr=math.inf), "optimizer.lr", "inf"),
        (sgd(momentum=1.0), "optimizer.momentum", "1.0"),
        (sgd(momentum=-0.1), "optimizer.momentum", "-0.1"),
        (sgd(wd=-1e-4), "optimizer.wd", "-0.0001"),
        (sgd(wd=None), "optimizer.wd", "None"),
        (sgd(schedule="step"), "optimizer.schedule", "'step'"),
        (sgd(schedule={}), "optimizer.schedule.name", "none, step, cosine"),
        (sgd(schedule={"name": "poly"}), "optimizer.schedule.name", "'poly'"),
        (sgd(schedule={"name": "none", "every": 3}), "optimizer.schedule.every", "3"),
        (sgd(schedule={"name": "step", "factor": 0.5}), "optimizer.schedule.every", "required"),
        (step(every=0), "optimizer.schedule.every", "got 0"),
        (step(every=2.5), "optimizer.schedule.every", "2.5"),
        (step(factor=0), "optimizer.schedule.factor", "got 0"),
        (step(factor=1.5), "optimizer.schedule.factor", "1.5"),
        (step(final_lr=0.0), "optimizer.schedule.final_lr", "0.0"),
        (cosine(final_lr=-0.01), "optimizer.schedule.final_lr", "-0.01"),
        (cosine(final_lr=0.2), "optimizer.schedule.final_lr", "0.2"),
        (cosine(warmup=-1), "optimizer.schedule.warmup", "-1"),
        (cosine(warmup=100), "optimizer.schedule.warmup", "100"),
        (cosine(every=10), "optimizer.schedule.every", "10"),
    ],
)
def test_invalid_spec_names_key_path_and_value(spec, key, value):
    with pytest.raises(DynallocError) as info:
        build_optimizer(spec, 100)
    message = str(info.value)
    assert message.split()[0] == key, message
    assert value in message
    assert "\n" not in message


@pytest.mark.parametrize("total", [0, -5, 10.0, None])
def test_invalid_total_iterations(total):
    with pytest.raises(DynallocError, match="total_iterations"):
        build_optimizer(sgd(), total)


@pytest.mark.parametrize(
    "schedule",
    [
        {"name": "none"},
        {"name": "step", "every": 7, "factor": 0.5},
        {"name": "cosine", "final_lr": 0.01, "warmup": 15},
        {"name": "cosine"},
    ],
)
def test_learning_rate_follows_mxnets_schedulers(schedule):
    """A PyTorch run's rates (`optim_spec.learning_rate`) are the MXNet run's, update by update."""
    from dynalloc.experiment.optim_spec import check_optimizer, learning_rate

    raw = {"name": "sgd", "lr": 0.2, "schedule": schedule}
    opt, spec = build_optimizer(raw, 100), check_optimizer(raw, 100)
    for update in range(1, 111):
        assert learning_rate(spec, update) == pytest.approx(lr_at(opt, update), rel=1e-12)

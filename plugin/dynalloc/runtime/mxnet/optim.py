"""The MXNet optimizer and learning-rate schedule that the run config's `optimizer` block asks
for (checked in `experiment.optim_spec`). A Gluon Trainer makes one update per `trainer.step`,
so the schedules count iterations."""

import mxnet as mx

from dynalloc.experiment.optim_spec import check_optimizer


def build_optimizer(spec, total_iterations):
    """An SGD or Adam optimizer with its schedule, from the run config's `optimizer` mapping.

    `rescale_grad` stays 1.0: `trainer.step(B)` divides the summed gradients by the batch.
    """
    spec = check_optimizer(spec, total_iterations)
    kind, params = spec.schedule
    scheduler = None
    if kind == "step":
        scheduler = mx.lr_scheduler.FactorScheduler(
            step=params["every"], factor=params["factor"], base_lr=spec.lr
        )
    elif kind == "cosine":
        scheduler = mx.lr_scheduler.CosineScheduler(
            max_update=total_iterations, base_lr=spec.lr, final_lr=params["final_lr"],
            warmup_steps=params["warmup"],
        )  # fmt: skip
    common = {"learning_rate": spec.lr, "wd": spec.wd, "lr_scheduler": scheduler,
              "rescale_grad": 1.0}  # fmt: skip
    if spec.name == "sgd":
        return mx.optimizer.SGD(momentum=spec.momentum, **common)
    return mx.optimizer.Adam(**common)

"""The PyTorch optimizer and schedule of the run config's `optimizer` block: the same SGD or
Adam, the same rates update by update (`experiment.optim_spec.learning_rate`, MXNet's schedules
as formulas). Weight decay is PyTorch's, added to the gradient, as MXNet's `wd` is."""

import torch

from dynalloc.experiment.optim_spec import check_optimizer, learning_rate


def build_optimizer(spec, total_iterations, params):
    """(optimizer, scheduler) over `params`; the scheduler steps once per iteration."""
    spec = check_optimizer(spec, total_iterations)
    params = list(params)
    if spec.name == "sgd":
        optimizer = torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum,
                                    weight_decay=spec.wd)  # fmt: skip
    else:
        optimizer = torch.optim.Adam(params, lr=spec.lr, weight_decay=spec.wd)
    # LambdaLR's count starts at 0 before the first update; the schedule's at 1.
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda done: learning_rate(spec, done + 1) / spec.lr
    )
    return optimizer, scheduler

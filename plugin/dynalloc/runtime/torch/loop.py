"""The training loop of a `framework: torch` run of `dynalloc train`: the loop of
`runtime.mxnet.loop` in PyTorch's words. Everything else is the Recorder's."""

from torch import nn


def train(run, net, optimizer, scheduler):
    """Train `net` through the Recorder `run` (entered) from its cursor to the end."""
    loss_fn = nn.CrossEntropyLoss()
    run.start(net, optimizer, scheduler, loss_fn=loss_fn)
    for epoch in run.epochs():
        for step in run.steps(epoch):
            x, y = run.batch(step)
            with step.compute():
                loss = loss_fn(net(x), y)
                loss.backward()
            step.finish(loss)
        run.end_epoch(*run.evaluate(net, loss_fn))

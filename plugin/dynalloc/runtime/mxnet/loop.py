"""The training loop of `dynalloc train`'s built-in networks: the samples of each step (staged
arrays or a streamed dataset), forward and backward timed, the test set at each epoch's end.
Everything else, the DynamicBatch, the books, checkpoints and resume, is the Recorder's, as for
a user's script."""

from mxnet import autograd, gluon


def train(run, net, trainer, scheduler=None):
    """Train `net` through the Recorder `run` (entered) from its cursor to the end; MXNet's
    schedule is the trainer's (`scheduler`, PyTorch's, is None here)."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    run.start(net, trainer, loss_fn=loss_fn)
    for epoch in run.epochs():
        for step in run.steps(epoch):
            x, y = run.batch(step)
            with step.compute():
                with autograd.record():
                    loss = loss_fn(net(x), y)
                loss.backward()
            step.finish(loss)
        run.end_epoch(*run.evaluate(net, loss_fn))

"""A user's own training script under `dynalloc train` (`script:` in the run config): the
built-in network and optimizer, the user's own loop through the Recorder. With `--mean` it
makes the classic mistake of a mean loss before backward()."""

import sys

from dynalloc.runtime.prepare import build, train_batch
from dynalloc.runtime.recorder import Recorder
from mxnet import autograd, gluon

mean = "--mean" in sys.argv[1:]
with Recorder.from_environment() as run:
    net, trainer = build(run.setup)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    run.start(net, trainer)
    for epoch in run.epochs():
        for step in run.steps(epoch):
            x, y = train_batch(run.data, step.indices)
            with step.compute():
                with autograd.record():
                    loss = loss_fn(net(x), y)
                    if mean:
                        loss = loss.mean()
                loss.backward()
            step.finish(loss)
        run.end_epoch(*run.evaluate(net, loss_fn))

"""A training script of one's own under `dynalloc train` (`script:` in the run config): the
built-in network, optimizer and loop, started as a user's script is and recorded through
`Recorder.from_environment()`. With `--mean` it makes the classic mistake instead: the loss
averaged before backward(); with `--own-step`, a Horovod script's trainer.step() left in.
`--accuracy-only` ends its epochs with a test accuracy and no test loss, as Horovod's does."""

import sys

from dynalloc.runtime.common.recorder import Recorder
from dynalloc.runtime.mxnet import loop
from dynalloc.runtime.mxnet.build import build
from mxnet import autograd, gluon

with Recorder.from_environment() as run:
    net, trainer = build(run.setup)
    mistake = sys.argv[1] if sys.argv[1:] else None
    if mistake is None:
        loop.train(run, net, trainer)
    elif mistake == "--accuracy-only":  # no mistake: a script that measures no test loss
        run.start(net, trainer)
        for epoch in run.epochs():
            for step in run.steps(epoch):
                x, y = run.batch(step)
                with step.compute():
                    with autograd.record():
                        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
                    loss.backward()
                step.finish(loss)
            run.end_epoch(None, 0.5)
    else:
        run.start(net, trainer)
        for step in run.steps(0):
            x, y = run.batch(step)
            with step.compute():
                with autograd.record():
                    loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
                    loss = loss.mean() if mistake == "--mean" else loss
                loss.backward()
                if mistake == "--own-step":
                    trainer.step(len(x))  # as a Horovod script steps its DistributedTrainer
            step.finish(loss)

"""A training script of one's own under `dynalloc train` (`script:` in the run config): the
built-in network, optimizer and loop, started as a user's script is and recorded through
`Recorder.from_environment()`. With `--mean` it makes the classic mistake instead: the loss
averaged before backward()."""

import sys

from dynalloc.runtime.common.recorder import Recorder
from dynalloc.runtime.mxnet import loop
from dynalloc.runtime.mxnet.build import build
from mxnet import autograd, gluon

with Recorder.from_environment() as run:
    net, trainer = build(run.setup)
    if "--mean" not in sys.argv[1:]:
        loop.train(run, net, trainer)
    else:
        run.start(net, trainer)
        step = next(iter(run.steps(0)))
        x, y = run.batch(step)
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y).mean()
        loss.backward()
        step.finish(loss)

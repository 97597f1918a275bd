"""A training script of one's own under dynalloc: ResNet-18 (v1) from MXNet's model zoo on the
staged digits, with its own augmentation (a random shift of up to 2 pixels and a small random
contrast change), recorded into the run directory as `dynalloc train` records its own runs.

Run it through a run config with `script: examples/own_script/train_resnet.py`:

    mpiexec -n 2 dynalloc train --config examples/own_script/run.yaml --out runs/resnet18

`dynalloc train` starts this file on every rank with the run config and the run directory in
DYNALLOC_CONFIG and DYNALLOC_RUN_DIR; `--shift` and `--contrast` come from `script_args`.
"""

import argparse

import mxnet as mx
import numpy as np
from dynalloc.mxnet import Recorder
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision


def augment(images, seed, iteration, shift, contrast):
    """Each image moved by up to `shift` pixels and its contrast scaled by 1 +- `contrast`: the
    draws depend on (seed, iteration, first sample) only, so a resumed run draws them again."""
    rng = np.random.default_rng([seed, iteration])
    moved = np.empty_like(images)
    for i, image in enumerate(images):
        dy, dx = rng.integers(-shift, shift + 1, size=2)
        moved[i] = np.roll(image, (dy, dx), axis=(-2, -1))
    scale = 1.0 + rng.uniform(-contrast, contrast, size=(len(images), 1, 1, 1))
    return (moved * scale).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shift", type=int, default=2, help="largest shift in pixels")
    parser.add_argument("--contrast", type=float, default=0.2, help="largest contrast change")
    args = parser.parse_args()

    with Recorder.from_environment() as run:
        config, data = run.config, run.data
        mx.random.seed(config["seed"])
        net = vision.get_model("resnet18_v1", classes=data.classes)
        net.initialize(mx.init.Xavier(), ctx=mx.cpu())
        net.hybridize()
        net(mx.nd.zeros((1, *data.input_shape))).wait_to_read()  # resolve deferred shapes
        trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.001, "wd": 1e-4})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        run.start(net, trainer)
        for epoch in run.epochs():
            for step in run.steps(epoch):
                rows = np.sort(step.indices)
                images = augment(
                    data.train_x[rows], config["seed"], step.iteration, args.shift, args.contrast
                )
                x, y = mx.nd.array(images), mx.nd.array(data.train_y[rows])
                with step.compute():
                    with autograd.record():
                        loss = loss_fn(net(x), y)  # one loss per sample: no .mean()
                    loss.backward()
                step.finish(loss)
            run.end_epoch(*run.evaluate(net, loss_fn))


if __name__ == "__main__":
    main()

"""What one 28x28 JPEG costs a rank to decode, crop, resize and flip (the ranks' OpenCV, Pillow,
mx.image) and a ResNet-18 step, measured on one core in this process for
`benchmarks/bench_stream.py`."""

import io
import os
import time

import numpy as np
from stream_runs import header, row


def in_process(dataset, decodes, steps):
    """On one core, as a rank: (ms per 28x28 image with the ranks' decode_into, Pillow and
    mx.image, and a rank's whole per-sample cost; the best of `steps` ResNet-18 forward and
    backward passes of 32 samples, in seconds)."""
    import mxnet as mx
    from dynalloc.data.augment import train_boxes
    from dynalloc.data.dataset import open_dataset
    from dynalloc.data.images import decode_into
    from dynalloc.data.readahead import Decoder
    from dynalloc.experiment.stream_config import check_stream
    from dynalloc.runtime.mxnet.models import build_model
    from PIL import Image

    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    try:
        data, stream = open_dataset(dataset), check_stream({})
        stream["crop_scale"] = data.default_crop_scale()
        rows = data.index["train"][:decodes]
        payloads = [data.read("train", i)[1] for i in range(decodes)]
        sizes = rows["height"], rows["width"]
        scale, ratio = stream["crop_scale"], stream["crop_ratio"]
        boxes, flips = train_boxes(0, 0, np.arange(decodes), *sizes, scale, ratio)
        crops = list(zip(payloads, boxes, flips, strict=True))
        out = np.empty((28, 28, 1), np.uint8)

        def ranks():
            for payload, box, flip in crops:
                decode_into(out, payload, 1, box, flip)

        def pillow():  # what the ranks did before OpenCV
            for payload, box, flip in crops:
                image = Image.open(io.BytesIO(payload))
                image = image.resize((28, 28), Image.BILINEAR, box=tuple(box))
                if flip:
                    image = image.transpose(Image.FLIP_LEFT_RIGHT)
                out[...] = np.asarray(image).reshape(out.shape)

        def mxnet():
            for payload, box, flip in crops:
                left, top, right, bottom = box.astype(int)
                image = mx.image.imdecode(payload, flag=0)
                image = mx.image.fixed_crop(
                    image, left, top, right - left, bottom - top, (28, 28), 1
                )
                if flip:
                    image = mx.nd.flip(image, axis=1)
                out[...] = image.asnumpy()

        def whole():
            Decoder(data, (28, 28), stream, 0).chunk("train", 0, np.arange(decodes))

        costs = [1e3 * best(f) / decodes for f in (ranks, pillow, mxnet, whole)]
        net = build_model({"zoo": "resnet18_v1"}, 10, (3, 96, 96), 0)
        x, y = mx.nd.random.uniform(shape=(32, 3, 96, 96)), mx.nd.zeros(32)
        loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()

        def step():
            with mx.autograd.record():
                value = loss(net(x), y)
            value.backward()
            mx.nd.waitall()

        return costs, best(step, steps)
    finally:
        os.sched_setaffinity(0, saved)


def best(f, times=3):
    """The fastest of `times` calls of `f`, after one to warm up."""
    f()
    seconds = []
    for _ in range(times):
        began = time.perf_counter()
        f()
        seconds.append(time.perf_counter() - began)
    return min(seconds)


def decoding(costs, decodes):
    ranks, pillow, mxnet, whole = costs
    return [
        "## Decoding one 28x28 JPEG (decode, random resized crop, flip), one core",
        "",
        *header("how", "ms per image"),
        row("the ranks' `data/images.py` decode_into (OpenCV)", f"{ranks:.3f}"),
        row("Pillow (open, resize of the box, transpose)", f"{pillow:.3f}"),
        row("MXNet (mx.image.imdecode, fixed_crop, mx.nd.flip, asnumpy)", f"{mxnet:.3f}"),
        row(
            "a rank's whole per-sample cost (`Decoder.chunk`: read, crop boxes, decode)",
            f"{whole:.3f}",
        ),
        "",
        f"Best of 3 passes over {decodes} images after a warm-up pass.",
        "",
    ]

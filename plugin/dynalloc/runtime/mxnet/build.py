"""An MXNet run's network, optimizer and trainer from its Setup (`runtime.common.prepare`), and
the NDArrays and evaluation sums that `dynalloc train` and `dynalloc baseline` share.
MXNet is imported inside the functions that use it, so that importing this module (the baseline
command does, for its `--help` too) loads neither MXNet nor its threads."""


def build(setup, **trainer_options):
    """Model, optimizer and trainer: validated here, before the run directory exists.
    `trainer_options` go to gluon.Trainer (the baseline's kvstore); by default none."""
    from mxnet import gluon

    from dynalloc.experiment.script_spec import built_by_dynalloc
    from dynalloc.runtime.mxnet.models import build_model
    from dynalloc.runtime.mxnet.optim import build_optimizer

    config, data = setup.config, setup.data
    optimizer = build_optimizer(built_by_dynalloc(config, "optimizer"), setup.total)
    net = build_model(
        built_by_dynalloc(config, "model"),
        data.classes,
        setup.input_shape,
        config["seed"],
        config["python_path"],
    )
    options = {"kvstore": None, **trainer_options}
    trainer = gluon.Trainer(net.collect_params(), optimizer, **options)
    return net, trainer


def ndarrays(x, y):
    """A batch's numpy arrays as MXNet's NDArrays (the feed's `tensors` for MXNet)."""
    import mxnet as mx

    return mx.nd.array(x), mx.nd.array(y)


def eval_sums(net, loss_fn, feed, rank, ranks, progress=None):
    """[summed loss, correct predictions] over rank's even slice of the test set; the sums of
    all ranks give the test loss and accuracy. `progress` is called after every batch (the
    stall watch's beat: a long evaluation is not a stall)."""
    loss_sum = correct = 0.0
    for x, y in feed.test_batches(rank, ranks):
        out = net(x)
        loss_sum += float(loss_fn(out, y).sum().asscalar())
        correct += float((out.argmax(axis=1) == y).sum().asscalar())
        if progress is not None:
            progress()
    return [loss_sum, correct]

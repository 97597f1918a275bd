"""What a rank sets up before the run directory is touched, the same for `dynalloc train` and
`dynalloc baseline`: so that a baseline run trains the same model on the same samples, and so
that every bad input is found while nothing has been written yet.

Each piece is built once per rank and passed down: the resolved config, the staged data (arrays
or a streamed index), the sampler that cuts every global batch, the emulated scenario, and the
network with its trainer.
MXNet is imported inside the functions that use it, so that importing this module (the baseline
command does, for its `--help` too) loads neither MXNet nor its threads.
"""

from dataclasses import dataclass

from dynalloc.core.partition import GlobalBatchSampler
from dynalloc.core.scenario import Scenario
from dynalloc.data.dataset import input_shape, open_dataset
from dynalloc.data.staged import StagedDataset
from dynalloc.data.streamed import StreamedDataset
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import (
    load_config,
    planned_epochs,
    resolve,
    total_iterations,
)


@dataclass(frozen=True)
class Setup:
    """One rank's view of a run: what the config asks and the data it is asked on."""

    config: dict
    data: StagedDataset | StreamedDataset
    input_shape: tuple  # one sample's (channels, height, width) as the network sees it
    sampler: GlobalBatchSampler
    scenario: Scenario
    total: int  # iterations the run makes
    epochs: int  # epochs those iterations touch (the last may be partial)


def prepare(config_path, rank, ranks, policy=None):
    """The Setup of `rank` of `ranks` from the run config at `config_path`; `policy` (a
    mapping) replaces the config's policy."""
    raw = load_config(config_path)
    config = resolve(raw if policy is None else {**raw, "policy": policy}, ranks)
    # Rank 0 reads every byte of arrays (sha256, NaN); the others check the manifest, shapes
    # and counts. A streamed dataset's checks cost time in proportion to its index on every rank.
    data = open_dataset(config["dataset"], verify=rank == 0)
    shape = input_shape(data, config)
    try:
        sampler = GlobalBatchSampler(
            data.train_size,
            config["global_batch"],
            config["seed"],
            config["drop_last"],
            config["min_share"],
            ranks,
        )
    except ValueError as error:
        raise DynallocError(f"global_batch: {error}") from None
    total = total_iterations(config, sampler.batches_per_epoch)
    return Setup(
        config=config,
        data=data,
        input_shape=shape,
        sampler=sampler,
        scenario=Scenario(ranks, **config["scenario"]),
        total=total,
        epochs=planned_epochs(config, sampler.batches_per_epoch),
    )


def build(setup, **trainer_options):
    """Model, optimizer and trainer: validated here, before the run directory exists.
    `trainer_options` go to gluon.Trainer (the baseline's kvstore); by default none."""
    from mxnet import gluon

    from dynalloc.runtime.models import build_model
    from dynalloc.runtime.optim import build_optimizer

    config, data = setup.config, setup.data
    optimizer = build_optimizer(config["optimizer"], setup.total)
    net = build_model(
        config["model"],
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

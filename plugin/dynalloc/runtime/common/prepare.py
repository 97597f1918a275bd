"""What a rank sets up before the run directory is touched, the same for `dynalloc train` and
`dynalloc baseline`: so that a baseline run trains the same model on the same samples, and so
that every bad input is found while nothing has been written yet.

Each piece is built once per rank and passed down: the resolved config, the staged data (arrays
or a streamed index), the sampler that cuts every global batch, the emulated scenario, and the
network with its trainer (the framework's own: `runtime.mxnet.build`, `runtime.torch.backend`).
Nothing here imports a framework.
"""

import os
from dataclasses import dataclass

from dynalloc.core.partition import GlobalBatchSampler
from dynalloc.core.scenario import Scenario
from dynalloc.data.dataset import input_shape, open_dataset
from dynalloc.data.staged import StagedDataset
from dynalloc.data.streamed import StreamedDataset
from dynalloc.errors import DynallocError
from dynalloc.experiment.elastic_spec import for_survivors
from dynalloc.experiment.run_config import (
    load_config,
    planned_epochs,
    resolve,
    total_iterations,
)
from dynalloc.experiment.warm_spec import PROBE
from dynalloc.experiment.warm_start import warm_costs


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
    raw = group_config(load_config(config_path), ranks)
    config = resolve(raw if policy is None else {**raw, "policy": policy}, ranks)
    # Rank 0 reads every byte of arrays (sha256, NaN); the others check the manifest, shapes
    # and counts. A streamed dataset's checks cost time in proportion to its index on every rank.
    data = open_dataset(config["dataset"], verify=rank == 0)
    shape = input_shape(data, config)
    if isinstance(data, StreamedDataset) and config["stream"]["crop_scale"] is None:
        config["stream"]["crop_scale"] = data.default_crop_scale()  # recorded in config.yaml
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
    scenario = Scenario(ranks, **config["scenario"])
    warm = config["policy"].get("warm_start")
    if warm not in (None, PROBE):  # known costs, each rank's own, as this run's ranks start
        factors = [scenario.factor(rank, 0) for rank in range(ranks)]
        config["policy"]["warm_start"] = warm_costs(warm, ranks, config, factors)
    return Setup(
        config=config,
        data=data,
        input_shape=shape,
        sampler=sampler,
        scenario=scenario,
        total=total,
        epochs=planned_epochs(config, sampler.batches_per_epoch),
    )


def group_config(raw, ranks):
    """The run config for the group of `ranks` that torchrun's elastic agent formed again after
    a worker or node was lost (or one joined): torchrun numbers the ranks anew without saying
    which were lost, so the per-rank entries of the first ranks are kept
    (`elastic_spec.for_survivors`). Only for an elastic run (an `elastic` section) that
    torchrun restarted."""
    if raw.get("elastic") is None or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        return raw
    return for_survivors(raw, range(ranks))

"""Saving and restoring a run's state at a checkpoint, so that a resumed run draws what the
uninterrupted one drew: the model, the optimizer, the data cursor, the policy, each rank's
non-trainable state and the random generators. The file format is `common.checkpoint`'s; what
the framework holds (parameters, optimizer, its generator) its backend reads and writes
(`runtime.mxnet.backend`, `runtime.torch.backend`)."""

import random

import numpy as np

from dynalloc import rundir
from dynalloc.core.state import export, restore, same_layout
from dynalloc.errors import DynallocError
from dynalloc.runtime.common import checkpoint


def open_run_dir(out, config):
    """Create the run directory, or find the checkpoint to resume it from.

    Returns (resume, notes): the newest usable checkpoint's payload (None for a fresh start) and
    what rank 0 should log about the choice. A checkpoint of the same run that already finished
    is resumed too (it only rewrites the final files); one of a finished run with another config
    is set aside (the pipeline reruns a run whose config changed), and an unfinished one of
    another run is refused, naming the key that differs.
    """
    notes = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        found = checkpoint.newest_valid(out, notes.append)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None
    if found and found[1]["complete"] and found[1]["config"] != config:
        notes.append(f"{out} holds a finished run of another config: starting afresh")
        checkpoint.remove_all(out)
        found = None
    if found:
        checkpoint.check_resumable(found[0], found[1]["config"], config)
        notes.append(f"resuming from {found[0]} (iteration {found[1]['iteration']})")
    rundir.prepare(out, config, resuming=bool(found))
    return (found[1] if found else None), notes


def payload(run, epoch, batch, progress, fixed):
    """What a checkpoint of the Recorder `run` holds; `fixed`: every rank's non-trainable
    state, `progress`: the epoch's (losses, sizes, seconds) so far."""
    params, trainer_states = run.backend.model_state(run.net, run.trainer, run.scheduler)
    losses, sizes, elapsed = progress
    return {
        "config": run.config,
        "iteration": run.dyn.iteration,
        "epoch": epoch,
        "batch": batch,
        "complete": run.dyn.iteration >= run.setup.total and batch == 0,
        "epoch_progress": (list(map(float, losses)), list(sizes), float(elapsed)),
        "params": params,
        "fixed_state": fixed,
        "trainer": trainer_states,
        "scaler": None if run.scaler is None else run.scaler.state_dict(),  # numbers only
        "policy": export(run.dyn.policy),  # plain data: no class is rebuilt from the file
        "random": {"numpy": np.random.get_state(), "python": random.getstate()},
        "books": run.books.state(),
    }


def restore_model(backend, net, trainer, scheduler, saved, scaler=None):
    """Parameters, BatchNorm statistics, optimizer state, a mixed-precision scaler's state and
    generators of the checkpoint; run before DynamicBatch broadcasts rank 0's parameters."""
    backend.restore_model(net, trainer, scheduler, saved["params"], saved["trainer"])
    if scaler is not None and saved.get("scaler"):  # none in a checkpoint written without one
        scaler.load_state_dict(saved["scaler"])
    np.random.set_state(tuple(saved["random"]["numpy"]))
    random.setstate(tuple(saved["random"]["python"]))


def restore_progress(backend, dyn, saved, config):
    """The data cursor, the policy (when it is the same policy on as many ranks) and each
    rank's non-trainable state (averaged when the number of ranks changed); returns what rank 0
    should log about it."""
    dyn.iteration = saved["iteration"]
    fixed = saved["fixed_state"]
    mine = fixed[dyn.rank] if len(fixed) == dyn.ranks else None
    average = [np.mean([f[i] for f in fixed], axis=0) for i in range(len(fixed[0]))]
    backend.set_fixed_state(dyn, mine if mine else average)
    old = saved["config"]
    same = all(old[k] == config[k] for k in ("ranks", "min_share", "max_share"))
    if not (same and _started_aside(old["policy"]) == _started_aside(config["policy"])):
        warm = isinstance(config["policy"], dict) and config["policy"].get("warm_start")
        start = "from policy.warm_start" if warm else "afresh"
        return [f"policy or ranks changed since the checkpoint: shares start {start}"]
    if not same_layout(dyn.policy, saved["policy"]):
        return ["the checkpoint's policy state is another version's: shares start afresh"]
    restore(dyn.policy, saved["policy"])
    return []


def _started_aside(policy):
    """The policy's config without its `warm_start`, which only says where its shares begin:
    a checkpoint's state supersedes it (a restart may drop or change it, `elastic_spec`)."""
    if isinstance(policy, dict):
        return {k: v for k, v in policy.items() if k != "warm_start"}
    return policy


def reseed(backend, config, iteration):
    """The framework's generator, a function of the iteration at every checkpoint (MXNet's
    state cannot be saved), so a resumed run draws what the uninterrupted one drew."""
    backend.reseed(config["seed"] * 1_000_003 + iteration)

"""Runs a ported upstream script as torchrun starts it, for the tests: torch seeded first (the
DDP tutorial's data and model are random on each rank), and with `--slow R=F` rank R emulated
F times slower through DynamicBatch's `slowdown`; at exit each rank writes its shares to
shares-RANK.json in the working directory (a file: the ranks' prints interleave on one pipe). With
`--mse`, F.cross_entropy is mean squared error: the tutorial's cross entropy over its one
output is 0 whatever the parameters (a softmax of one class), so nothing would train, and a
test of the same parameters would prove nothing; its data is a regression. With
`--no-dropout`, dropout passes its input through: its masks are drawn for each rank's share, so
runs split otherwise could not meet. With `--save-at K`, rank 0 saves the model's parameters
after the K-th optimizer step to saved.pt (Horovod's MNIST example keeps no snapshot, and two
runs' parameters part once a ReLU or max-pool input sits within float rounding of its kink:
tests/mpi/horovod_runner.py says more).

    torchrun ... port_runner.py [--slow R=F] [--mse] [--no-dropout] [--save-at K] SCRIPT [ARGS]
"""

import atexit
import json
import os
import runpy
import sys

import dynalloc.torch
import torch

TAKES = {"--slow": 1, "--mse": 0, "--no-dropout": 0, "--save-at": 1}  # option: its values
options, arguments = {}, sys.argv[1:]
while arguments[0] in TAKES:
    taken = TAKES[arguments[0]]
    options[arguments[0]] = arguments[1] if taken else True
    arguments = arguments[1 + taken :]
factors = {}
if "--slow" in options:
    rank, factor = options["--slow"].split("=")
    factors = {int(rank): float(factor)}
if "--mse" in options:
    torch.nn.functional.cross_entropy = torch.nn.functional.mse_loss
if "--no-dropout" in options:
    torch.nn.functional.dropout = torch.nn.functional.dropout2d = lambda x, *args, **kwargs: x
torch.manual_seed(0)
mine = factors.get(int(os.environ["RANK"]), 1.0)
made = []
plain = dynalloc.torch.DynamicBatch


def emulated(model, optimizer, *args, **kwargs):
    made.append(plain(model, optimizer, *args, slowdown=lambda iteration: mine, **kwargs))
    if "--save-at" in options and made[-1].rank == 0:
        steps, last = [], int(options["--save-at"])
        module = getattr(model, "module", model)

        def save(optimizer, args, kwargs):
            steps.append(None)
            if len(steps) == last:
                torch.save({k: v.detach().clone() for k, v in module.state_dict().items()},
                           "saved.pt")  # fmt: skip

        optimizer.register_step_post_hook(save)
    return made[-1]


dynalloc.torch.DynamicBatch = emulated


@atexit.register
def write_shares():
    if made:
        shares = [row.batch_size for row in made[0].rows]
        with open(f"shares-{made[0].rank}.json", "w") as out:
            json.dump(shares, out)


sys.argv = arguments
runpy.run_path(arguments[0], run_name="__main__")

"""Runs a ported upstream script as torchrun starts it, for the tests: torch seeded first (the
DDP tutorial's data and model are random on each rank), and with `--slow R=F` rank R emulated
F times slower through DynamicBatch's `slowdown`; at exit each rank writes its shares to
shares-RANK.json in the working directory (a file: the ranks' prints interleave on one pipe). With
`--mse`, F.cross_entropy is mean squared error: the tutorial's cross entropy over its one
output is 0 whatever the parameters (a softmax of one class), so nothing would train, and a
test of the same parameters would prove nothing; its data is a regression.

    torchrun ... port_runner.py [--slow R=F] [--mse] SCRIPT [SCRIPT'S ARGUMENTS]
"""

import atexit
import json
import os
import runpy
import sys

import dynalloc.torch
import torch

arguments = sys.argv[1:]
factors = {}
if arguments[0] == "--slow":
    rank, factor = arguments[1].split("=")
    factors, arguments = {int(rank): float(factor)}, arguments[2:]
if arguments[0] == "--mse":
    torch.nn.functional.cross_entropy, arguments = torch.nn.functional.mse_loss, arguments[1:]
torch.manual_seed(0)
mine = factors.get(int(os.environ["RANK"]), 1.0)
made = []
plain = dynalloc.torch.DynamicBatch


def emulated(*args, **kwargs):
    made.append(plain(*args, slowdown=lambda iteration: mine, **kwargs))
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

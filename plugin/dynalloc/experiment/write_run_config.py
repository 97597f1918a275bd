"""`dynalloc run-config`: write one run's config (from the pipeline's grid) as the YAML that
`dynalloc train` reads. The rule passes the run as JSON in its params, so Snakemake reruns
exactly the runs whose settings changed."""

import json

import yaml

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write


def add_arguments(parser):
    parser.add_argument("--json", required=True, help="the run config as a JSON object")
    parser.add_argument("--out", required=True, help="YAML file to write")


def run(args):
    try:
        config = json.loads(args.json)
    except json.JSONDecodeError as error:
        raise DynallocError(f"--json is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise DynallocError("--json must be a JSON object of run-config keys")
    try:
        with atomic_write(args.out) as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
    except OSError as error:
        raise DynallocError(f"cannot write {args.out}: {error.strerror}") from None

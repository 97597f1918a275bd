"""dynalloc: re-divide each global batch between data-parallel ranks so that all finish together.

The folders are the boundaries (DESIGN.md): `core` (numpy only: shares, cost models, policies,
partition, scenarios, simulation) is importable everywhere; `experiment` (run configs, the grid)
and `analysis` (pandas, matplotlib) never import MXNet or mpi4py; `data` stages datasets;
`runtime` holds MPI and MXNet (`runtime.mxnet.gluon.DynamicBatch`, `dynalloc train`). `runtime` and
`analysis` share only the run directory, through `rundir`.
"""

__version__ = "0.1.0"

"""dynalloc: re-divide each global batch between data-parallel ranks so that all finish together.

The pure modules (policies, shares, partition, scenario, ...) import only numpy; the MPI exchange
(`dynalloc.exchange`) and the Gluon integration (`dynalloc.gluon`) are thin layers over them.
"""

__version__ = "0.1.0"

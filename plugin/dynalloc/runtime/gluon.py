"""The path of MXNet's DynamicBatch before runtime/ had rooms, kept for scripts that import it;
`dynalloc.mxnet` is the documented face."""

from dynalloc.runtime.mxnet.gluon import DynamicBatch

__all__ = ["DynamicBatch"]

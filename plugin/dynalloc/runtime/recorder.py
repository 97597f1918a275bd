"""The path of the Recorder before runtime/ had rooms, kept for scripts that import it;
`dynalloc.mxnet` and `dynalloc.torch` are the documented faces."""

from dynalloc.runtime.common.recorder import Recorder

__all__ = ["Recorder"]

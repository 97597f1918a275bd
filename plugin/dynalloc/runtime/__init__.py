"""The ranks' side of a run, in three rooms: `common` (the framework-neutral run machinery:
the allocation every DynamicBatch shares, the Recorder and its books, checkpoints and resume, the
run directory's lock, stall and peer watches, faults, telemetry, timing, `dynalloc train` and the
pipeline's job), and one adapter per framework, `mxnet` (Gluon's DynamicBatch, the weighted MPI
exchange, the built-in networks, the dist_sync baseline) and `torch` (PyTorch's DynamicBatch, the
DDP comm hook, the process group). An adapter imports `common`, never the other adapter, and
`common` imports no adapter (it names their backends, `common.backends`).

Users import the faces `dynalloc.mxnet` and `dynalloc.torch`; `runtime.gluon` and
`runtime.recorder` are the older paths of the same classes."""

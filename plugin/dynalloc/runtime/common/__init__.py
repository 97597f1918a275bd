"""The framework-neutral run machinery that both adapters (`runtime.mxnet`, `runtime.torch`)
build on: the allocation every DynamicBatch shares, the Recorder and its books, checkpoints and
resume, the run directory's lock, stall and peer watches, faults, telemetry, timing, data feeds,
`dynalloc train` and the pipeline's job. It imports no framework."""

"""MXNet's adapter: Gluon's DynamicBatch and the weighted MPI exchange, the built-in networks,
optimizers and loop of `dynalloc train`, the Recorder's MXNet backend and the dist_sync baseline
(`dynalloc baseline`). The face for users is `dynalloc.mxnet`."""

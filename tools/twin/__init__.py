"""The scheduling twin: the real kube-scheduler, KWOK, Kueue and the Job controller against a test apiserver.

- `harness.Twin` starts the parts built by `tools.twin_build` against a `tools.k8s_testenv.LocalCluster`
  (decision 0224); the smoke tests in tests/twin/ drive it.
- `replay.replay` replays a window of workloads on it and `record` reads the outcome from watches
  (decision 0234); `from_warehouse` rebuilds a window from the warehouse and `model_gap` compares
  the product's quota model with the twin (decision 0235).
"""

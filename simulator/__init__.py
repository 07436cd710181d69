"""A deterministic GPU fleet: dcgm-exporter metrics, kube-state-metrics and Kueue series,
Kubernetes objects and the ground truth computed from the generator's own intervals.

Product code (`gpuledger simulate`, `gpuledger demo`). May import `gpuledger.core` and the
warehouse (to load what it generates); the parts that write to a cluster live in `tools/`.
"""

"""Read-only adapters: Prometheus/VictoriaMetrics (dcgm-exporter, kube-state-metrics, Kueue, vLLM),
the Kubernetes API and the NVML agent.

Collectors return typed Polars frames (declared in `gpuledger.core.frames`); they never write to
the warehouse themselves. May import only `gpuledger.core` (and `kubernetes` to read).
"""

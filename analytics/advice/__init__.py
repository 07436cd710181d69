"""Fleet-shaping advice (issue 19): one module per kind, each a pure analysis over frames with
its method in the module docstring (`profile_catalog`, `fragmentation`, `overcommit`,
`autoscaling` + `autoscaling_manifest`), and `run`, which reads the warehouse and registers
the kinds `gpuledger recommend --kind` offers (`run.KINDS`); `preemption` flags queues where
preemption throws away a real share of spend (admit before run). The top room of analytics
below `exports`: may import `workloads` and every room below it (and core, warehouse)."""

FLEET_SHAPING_KINDS = ("profile-catalog", "fragmentation", "overcommit", "autoscaling")
"""The four kinds that reshape the fleet: what the Fleet page and the monthly fleet statement
show (the DRA kinds stay on the CLI and the Fleet page's DRA section). Here, not in `run`, so
naming them imports no analysis (the serving store's publisher runs in every writer's close)."""

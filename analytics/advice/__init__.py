"""Fleet-shaping advice (issue 19): one module per kind, each a pure analysis over frames with
its method in the module docstring (`profile_catalog`, `fragmentation`, `overcommit`,
`autoscaling` + `autoscaling_manifest`), and `run`, which reads the warehouse and registers
the kinds `gpuledger recommend --kind` offers (`run.KINDS`)."""

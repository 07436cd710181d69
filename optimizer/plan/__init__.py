"""The Plan contract with the actuator: the frozen `Plan` types (`contract`), how a plan is
evaluated (`evaluation`), its lifecycle (`status`), storage (`store`) and how it is shown
(`render`). Used by `mig` and `quota`; may import only `deadline`, `solver_status`, core and
warehouse, never `mig` or `quota`.
"""

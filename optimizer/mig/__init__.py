"""MIG repartitioning: the observed fleet (`observed`, read from the warehouse) and its inputs
(`inputs`), the slice geometry (`geometry`), the CP-SAT model (`model`), workload assignment
(`assign`), the baselines it is compared with (`baselines`), a synthetic fleet (`synthetic`) and
`planner`, which turns it all into a frozen MIG `Plan`. May import `plan`, `deadline`,
`solver_status` (and core, warehouse, analytics); never `quota`.
"""

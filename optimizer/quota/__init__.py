"""Queue quotas: the neutral queue model (`spec`) and its inputs (`inputs`, read through the
queue-system readers in `queues`), demand forecast (`forecast`), the CP-SAT model (`model`),
fit, replay, guarantees, backtest and verdict, a synthetic fleet (`synthetic`) and `planner`,
which turns it all into a frozen quota `Plan`. May import `plan`, `deadline`, `solver_status`
(and core, warehouse, analytics); never `mig`.
"""

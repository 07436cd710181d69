"""CP-SAT models that turn the warehouse's facts into frozen Plans, in rooms by concept:

- `mig/` and `quota/`: MIG repartitioning and queue quotas (with the queue-system readers in
  `quota/queues/`); neither imports the other;
- `plan/`: the `Plan` types, the contract with the actuator, and their evaluation, status,
  storage and rendering;
- `deadline` and `solver_status`: the time limit and the solver outcome both planners share.

A room imports only rooms below it (the nested `optimizer-rooms` contract in pyproject.toml).
The stage may import core, warehouse and analytics; never `kubernetes` (it proposes, the
actuator applies) and never `duckdb` directly.
"""

"""Chargeback analytics: pure functions over the warehouse, in rooms by concept (top → bottom):

- `exports`: the JSON documents of bill, idle and recommendations (the documents facade);
- `advice/`: fleet-shaping advice (profile catalog, fragmentation, overcommit, autoscaling, DRA
  kinds) and preemption advice;
- `workloads/`: requested vs used per workload, idle ranking, profiles, right-sizing, token cost;
- `billing/`: the priced, conserved bill (`billing.bill.compute_bill` → `Bill`), prices, lines,
  money, special lines, unallocated capacity, preemption, the org bill, budgets, team overview;
- `usage/`: card-hours per hour (`hourly`), the stored roll-up (`rollup`), usage per day (`daily`);
- `devices/` and `sampling/`: how a card is handed out and what share each holder pays for
  (device sources, shares, unlabeled holders, capacity); raw samples → held intervals;
- `teams/`: namespaces and queues → teams.

A room imports only rooms below it (the nested `analytics-rooms` contract in pyproject.toml).
The stage may import `gpuledger.core` and `gpuledger.warehouse` (its named queries); nothing
downstream.
"""

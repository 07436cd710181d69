"""Chargeback analytics: pure functions over the warehouse.

- `bill`: the priced, conserved bill (`compute_bill` → `Bill`), built from `usage` (card-hours per
  day, device and holder from the hourly roll-up or raw samples), `capacity` (present and
  stranded card-time), `prices`, `teams` and `lines` (grouping, redistribution, whole cents);
- `samples` → `hourly` → `rollup`: intervals from raw samples, the `card_hours_hourly` and
  `allocations` frames; `shares` and `unlabeled` say what fraction of a card each holder has;
- `idle`, `tokens`, `workloads`, `profiles`, `recommend`: idle ranking, token cost,
  requested-vs-used, workload profiles and right-sizing with savings.

May import `gpuledger.core` and `gpuledger.warehouse` (its named queries); nothing downstream.
"""

"""The priced, conserved bill: `bill` (`compute_bill` → `Bill`), its unallocated and stranded
capacity (`unallocated`), `prices`, `lines` (grouping, redistribution, whole cents), `money`,
`special_lines`, preemption losses by priority class (`preemption`, `priority_class`), the
multi-cluster `org_bill`, `budgets` and the per-team `overview`. May import `usage`, `devices`,
`sampling` and `teams` (and core, warehouse); never `workloads`, `advice` or `exports`.
"""

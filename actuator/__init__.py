"""The only code that writes to a cluster: approved plans applied through one guarded gateway.

Dry-run first, every write guarded by a resourceVersion precondition, drains before MIG changes,
rollback and an audit row for every action. May import `gpuledger.core`, `gpuledger.warehouse`,
`gpuledger.analytics` and `gpuledger.optimizer` (the frozen Plan contract) and `kubernetes`;
never the dashboards, reports or the CLI.
"""

"""Who owns what: namespaces → teams (`namespaces`, the `team_table`), Kueue queues → teams
(`queues`) and Volcano queues → teams (`volcano`). The bottom room of analytics beside
`sampling` and `devices`: may import `gpuledger.core` and `gpuledger.warehouse`, no other room.
"""

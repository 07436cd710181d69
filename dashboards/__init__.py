"""The Dash dashboards for team leads, admins and finance.

Reads through the warehouse's named queries and a serving snapshot, computes nothing of its own
that `gpuledger.analytics` already computes, and calls the actuator's approval policy for the
Approve and Apply buttons. May import core, warehouse, analytics, optimizer and actuator; never
reports or the CLI, and never `duckdb` directly.
"""

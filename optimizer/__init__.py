"""CP-SAT models that turn the warehouse's facts into frozen Plans: MIG repartitioning and queue quotas.

The `Plan` types are the contract with the actuator. May import core, warehouse and analytics;
never `kubernetes` (it proposes, the actuator applies) and never `duckdb` directly.
"""

"""Named, typed read queries: the warehouse's read side.

Every other stage reads the warehouse through a function here (one module per consumer), never
with SQL of its own. Each function takes a `Warehouse` (or anything with its read methods) and
returns a Polars frame or plain values with documented columns.
"""

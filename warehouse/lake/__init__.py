"""The org-wide lake: each cluster publishes its bill partitions; the org bill reads them all.

`location` (local or S3), `manifest` and `partition` (publish, manifest last), `reader`
(committed partitions only), `org_sql` and the two engines (`duckdb_engine`, `spark_engine`)
that run the same query. The contract is docs/guide/lake.md.
"""

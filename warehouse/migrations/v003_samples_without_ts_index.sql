-- v003: raw samples lose their ART index on ts (docs/decisions/0070).
-- Rows arrive in time order, one load window at a time, so DuckDB's per-row-group zone maps
-- (min/max of ts) already skip every row group outside a time range; the index only cost
-- the load (its maintenance grew with the table) and disk.
DROP INDEX IF EXISTS gpu_samples_ts;

-- v019: the day fingerprints of the tables the serving store keeps per UTC day (the hourly and
-- daily roll-ups, the allocations, the queue samples; docs/decisions/0289): the row count and the
-- sum of row hashes per day, which every later write keeps current in its own transaction
-- (`warehouse.sample_fingerprints.ROLLUPS`), filled here from the rows stored so far, so a publish
-- of the serving store reads them instead of hashing every row. Each hash names every stored
-- column (`Fingerprinted.columns`; a test holds what it fills to the rows).
CREATE TABLE IF NOT EXISTS card_hours_hourly_fingerprints (
  day DATE NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO card_hours_hourly_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, uuid, gpu_i_id, vgpu, profile, node, model, pool, sharing_mode, namespace,
                     pod, queue, share, held_hours, card_hours, idle_card_hours,
                     held_idle_card_hours, active_ratio, fb_used_max_mib, rules)) AS HUGEINT) AS row_hashes
FROM card_hours_hourly GROUP BY ALL;
CREATE TABLE IF NOT EXISTS card_hours_daily_fingerprints (
  day DATE NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO card_hours_daily_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, uuid, gpu_i_id, vgpu, profile, namespace, pod, node, model, pool,
                     sharing_mode, queue, held_hours, card_hours, idle_card_hours,
                     held_idle_card_hours, card_active, card_unknown, held_active, held_known,
                     fb_used_max_mib)) AS HUGEINT) AS row_hashes
FROM card_hours_daily GROUP BY ALL;
CREATE TABLE IF NOT EXISTS allocations_fingerprints (
  day DATE NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO allocations_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, end_ts, uuid, gpu_i_id, vgpu, node, namespace, pod, sharing_mode, share,
                     queue, rules)) AS HUGEINT) AS row_hashes
FROM allocations GROUP BY ALL;
CREATE TABLE IF NOT EXISTS queue_samples_fingerprints (
  day DATE NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO queue_samples_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, cluster_queue, flavor, resource, nominal_quota, usage, pending_workloads,
                     admission_wait_s)) AS HUGEINT) AS row_hashes
FROM queue_samples GROUP BY ALL;

-- v016: the daily roll-up (issue 34, docs/decisions/0236). `card_hours_hourly` summed per UTC day
-- and row name with the partial sums the bill combines; derived, rewritten by every load of the
-- hourly roll-up for the days it touches (`warehouse.daily_rollup`). An upgraded file gets the
-- day rows of every hour already rolled up.
CREATE TABLE IF NOT EXISTS card_hours_daily (
  ts TIMESTAMPTZ NOT NULL,
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  vgpu VARCHAR,
  profile VARCHAR,
  namespace VARCHAR,
  pod VARCHAR,
  node VARCHAR NOT NULL,
  model VARCHAR NOT NULL,
  pool VARCHAR,
  sharing_mode VARCHAR NOT NULL,
  queue VARCHAR,
  held_hours DOUBLE NOT NULL,
  card_hours DOUBLE NOT NULL,
  idle_card_hours DOUBLE NOT NULL,
  held_idle_card_hours DOUBLE NOT NULL,
  card_active DOUBLE,
  card_unknown DOUBLE,
  held_active DOUBLE,
  held_known DOUBLE,
  fb_used_max_mib DOUBLE
);
INSERT INTO card_hours_daily
SELECT to_timestamp((epoch_us(ts) // 86400000000) * 86400) AS ts,
    uuid, gpu_i_id, vgpu, profile, namespace, pod, node, model, pool, sharing_mode, queue,
    sum(held_hours), sum(card_hours), sum(idle_card_hours), sum(held_idle_card_hours),
    sum(card_hours * active_ratio),
    sum(card_hours) FILTER (WHERE active_ratio IS NULL),
    sum(held_hours * active_ratio),
    sum(held_hours) FILTER (WHERE active_ratio IS NOT NULL),
    max(fb_used_max_mib)
FROM card_hours_hourly
GROUP BY ALL ORDER BY 1;

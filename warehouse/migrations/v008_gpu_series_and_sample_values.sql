-- v008: raw GPU samples as a series dimension and integer-keyed values (docs/decisions/0128).
-- The eight label columns repeat unchanged for every minute of a device's series: they move to
-- `gpu_series` (one row per label tuple, numbered `series_id`), each sample keeps `ts`, its
-- `series_id` and the nine values in `gpu_sample_values`, and a view `gpu_samples` joins them
-- back into the columns every reader queries. Stored rows are copied, ordered (hour, series,
-- ts) as every load writes them, so their row groups stay within an hour for the zone maps.
CREATE TABLE IF NOT EXISTS gpu_series (
  series_id INTEGER NOT NULL,
  node VARCHAR NOT NULL,
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  mig_profile VARCHAR,
  vgpu VARCHAR,
  namespace VARCHAR,
  pod VARCHAR,
  container VARCHAR,
  PRIMARY KEY (series_id)
);
CREATE TABLE IF NOT EXISTS gpu_sample_values (
  ts TIMESTAMPTZ NOT NULL,
  series_id INTEGER NOT NULL,
  gr_engine_active DOUBLE,
  sm_active DOUBLE,
  gpu_util DOUBLE,
  fb_used_mib DOUBLE,
  fb_free_mib DOUBLE,
  power_w DOUBLE,
  tensor_active DOUBLE,
  dram_active DOUBLE,
  gpu_temp_c DOUBLE
);
INSERT INTO gpu_series (series_id, node, uuid, gpu_i_id, mig_profile, vgpu, namespace, pod, container)
SELECT row_number() OVER (ORDER BY node NULLS FIRST, uuid NULLS FIRST, gpu_i_id NULLS FIRST,
    mig_profile NULLS FIRST, vgpu NULLS FIRST, namespace NULLS FIRST, pod NULLS FIRST,
    container NULLS FIRST),
  node, uuid, gpu_i_id, mig_profile, vgpu, namespace, pod, container
FROM (SELECT DISTINCT node, uuid, gpu_i_id, mig_profile, vgpu, namespace, pod, container
      FROM gpu_samples);
INSERT INTO gpu_sample_values (ts, series_id, gr_engine_active, sm_active, gpu_util, fb_used_mib,
    fb_free_mib, power_w, tensor_active, dram_active, gpu_temp_c)
SELECT g.ts, s.series_id, g.gr_engine_active, g.sm_active, g.gpu_util, g.fb_used_mib,
  g.fb_free_mib, g.power_w, g.tensor_active, g.dram_active, g.gpu_temp_c
FROM gpu_samples g JOIN gpu_series s
  ON s.node IS NOT DISTINCT FROM g.node AND s.uuid IS NOT DISTINCT FROM g.uuid
  AND s.gpu_i_id IS NOT DISTINCT FROM g.gpu_i_id AND s.mig_profile IS NOT DISTINCT FROM g.mig_profile
  AND s.vgpu IS NOT DISTINCT FROM g.vgpu AND s.namespace IS NOT DISTINCT FROM g.namespace
  AND s.pod IS NOT DISTINCT FROM g.pod AND s.container IS NOT DISTINCT FROM g.container
ORDER BY date_trunc('hour', g.ts), s.series_id, g.ts;
DROP TABLE gpu_samples;
CREATE VIEW gpu_samples AS SELECT v.ts, s.node, s.uuid, s.gpu_i_id, s.mig_profile, s.vgpu,
  s.namespace, s.pod, s.container, v.gr_engine_active, v.sm_active, v.gpu_util, v.fb_used_mib,
  v.fb_free_mib, v.power_w, v.tensor_active, v.dram_active, v.gpu_temp_c
FROM gpu_sample_values v JOIN gpu_series s ON s.series_id = v.series_id;

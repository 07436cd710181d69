-- v009: the sample values no page, bill or report reads are stored at a coarser step
-- (docs/decisions/0143): sm_active, tensor_active and dram_active at 0.01 (1 %), power_w at
-- 0.1 W; every other column is copied unchanged. Rows are copied in their stored order (hour,
-- series, ts), so the zone maps on ts and the runs of each series stay as they were; the view
-- binds gpu_sample_values by name and reads the new table after the rename. The whole step
-- runs in the migration's one transaction: a crash leaves the file at v8, untouched.
CREATE TABLE gpu_sample_values_v009 (
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
INSERT INTO gpu_sample_values_v009 (ts, series_id, gr_engine_active, sm_active, gpu_util,
    fb_used_mib, fb_free_mib, power_w, tensor_active, dram_active, gpu_temp_c)
SELECT ts, series_id, gr_engine_active, round(sm_active, 2), gpu_util, fb_used_mib, fb_free_mib,
  round(power_w, 1), round(tensor_active, 2), round(dram_active, 2), gpu_temp_c
FROM gpu_sample_values;
DROP TABLE gpu_sample_values;
ALTER TABLE gpu_sample_values_v009 RENAME TO gpu_sample_values;

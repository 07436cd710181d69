-- v018: the stored GPU and token samples' fingerprints per UTC day (docs/decisions/0274): the
-- row count and the sum of row hashes (per day and series for the GPU samples, per day for the
-- token samples), which every later write keeps current in its own transaction
-- (`warehouse.sample_fingerprints`), filled here from the rows stored so far. Each hash names
-- every stored column (`Fingerprinted.columns`; a test holds what it fills to the rows).
CREATE TABLE IF NOT EXISTS gpu_sample_fingerprints (
  day DATE NOT NULL,
  series_id INTEGER NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO gpu_sample_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day, series_id,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, series_id, gr_engine_active, sm_active, gpu_util, fb_used_mib, fb_free_mib,
                     power_w, tensor_active, dram_active, gpu_temp_c)) AS HUGEINT) AS row_hashes
FROM gpu_sample_values GROUP BY ALL;
CREATE TABLE IF NOT EXISTS token_sample_fingerprints (
  day DATE NOT NULL,
  sample_rows BIGINT NOT NULL,
  row_hashes HUGEINT NOT NULL
);
INSERT INTO token_sample_fingerprints
SELECT DATE '1970-01-01' + CAST(epoch_us(ts) // 86400000000 AS INTEGER) AS day,
       count(*) AS sample_rows,
       CAST(sum(hash(ts, namespace, pod, model_name, prompt_tokens_total, generation_tokens_total,
                     num_requests_waiting, num_requests_running)) AS HUGEINT) AS row_hashes
FROM token_samples GROUP BY ALL;

-- v011: HAMi's pod-to-card allocations (core/frames_hami.py): which card each container got and
-- how much of it, per source (the pod annotation from the API, the scheduler's hami_vgpu_*
-- series from Prometheus), over the time each source saw it.
CREATE TABLE IF NOT EXISTS vgpu_allocations (
  uuid VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  container_index INTEGER NOT NULL,
  source VARCHAR NOT NULL,
  node VARCHAR,
  mem_mib DOUBLE,
  cores_pct DOUBLE,
  card_mem_mib DOUBLE,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (uuid, namespace, pod, container_index, source, start_ts)
);

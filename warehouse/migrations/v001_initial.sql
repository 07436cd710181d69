-- v1 "initial schema", frozen as gpuledger 0.1.0 released it (the text its
-- `core.frames.TABLES` generated then, plus the audit sequence and the sample time index).
-- Never edit this file: files created by that release hold exactly this schema. A change is a
-- new step, `vNNN_<what>.sql`, listed in warehouse/migrations/__init__.py.

CREATE TABLE IF NOT EXISTS gpu_samples (
  ts TIMESTAMPTZ NOT NULL,
  node VARCHAR NOT NULL,
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  mig_profile VARCHAR,
  vgpu VARCHAR,
  namespace VARCHAR,
  pod VARCHAR,
  container VARCHAR,
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

CREATE TABLE IF NOT EXISTS token_samples (
  ts TIMESTAMPTZ NOT NULL,
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  model_name VARCHAR NOT NULL,
  prompt_tokens_total DOUBLE,
  generation_tokens_total DOUBLE
);

CREATE TABLE IF NOT EXISTS queue_samples (
  ts TIMESTAMPTZ NOT NULL,
  cluster_queue VARCHAR NOT NULL,
  flavor VARCHAR NOT NULL,
  resource VARCHAR NOT NULL,
  nominal_quota DOUBLE,
  usage DOUBLE,
  pending_workloads DOUBLE,
  admission_wait_s DOUBLE
);

CREATE TABLE IF NOT EXISTS gpus (
  uuid VARCHAR NOT NULL,
  node VARCHAR NOT NULL,
  gpu_index INTEGER NOT NULL,
  model VARCHAR NOT NULL,
  model_name VARCHAR,
  memory_mib DOUBLE,
  pool VARCHAR,
  sharing_mode VARCHAR NOT NULL,
  replicas INTEGER,
  first_seen TIMESTAMPTZ,
  last_seen TIMESTAMPTZ,
  PRIMARY KEY (uuid)
);

CREATE TABLE IF NOT EXISTS nodes (
  node VARCHAR NOT NULL,
  pool VARCHAR,
  model VARCHAR,
  gpu_count INTEGER,
  sharing_mode VARCHAR,
  replicas INTEGER,
  mig_config VARCHAR,
  mig_config_state VARCHAR,
  labels JSON,
  capacity JSON,
  allocatable JSON,
  resource_version VARCHAR,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (node)
);

CREATE TABLE IF NOT EXISTS namespaces (
  namespace VARCHAR NOT NULL,
  team VARCHAR,
  labels JSON,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (namespace)
);

CREATE TABLE IF NOT EXISTS mig_instances (
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  profile VARCHAR NOT NULL,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (uuid, gpu_i_id, profile, start_ts)
);

CREATE TABLE IF NOT EXISTS pods (
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  node VARCHAR,
  queue VARCHAR,
  owner_kind VARCHAR,
  owner_name VARCHAR,
  gpu_requests JSON,
  labels JSON,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (namespace, pod, start_ts)
);

CREATE TABLE IF NOT EXISTS allocations (
  ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  vgpu VARCHAR,
  node VARCHAR NOT NULL,
  namespace VARCHAR,
  pod VARCHAR,
  sharing_mode VARCHAR NOT NULL,
  share DOUBLE NOT NULL,
  queue VARCHAR
);

CREATE TABLE IF NOT EXISTS card_hours_hourly (
  ts TIMESTAMPTZ NOT NULL,
  uuid VARCHAR NOT NULL,
  gpu_i_id INTEGER NOT NULL,
  vgpu VARCHAR,
  profile VARCHAR,
  node VARCHAR NOT NULL,
  model VARCHAR NOT NULL,
  pool VARCHAR,
  sharing_mode VARCHAR NOT NULL,
  namespace VARCHAR,
  pod VARCHAR,
  queue VARCHAR,
  share DOUBLE NOT NULL,
  held_hours DOUBLE NOT NULL,
  card_hours DOUBLE NOT NULL,
  idle_card_hours DOUBLE NOT NULL,
  held_idle_card_hours DOUBLE NOT NULL,
  active_ratio DOUBLE,
  fb_used_max_mib DOUBLE
);

CREATE TABLE IF NOT EXISTS queues (
  kind VARCHAR NOT NULL,
  name VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  cohort VARCHAR,
  spec JSON,
  resource_version VARCHAR,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (kind, namespace, name)
);

CREATE TABLE IF NOT EXISTS price_book (
  model VARCHAR NOT NULL,
  effective_from DATE NOT NULL,
  unit_price DOUBLE NOT NULL,
  currency VARCHAR NOT NULL,
  version VARCHAR NOT NULL,
  PRIMARY KEY (model, effective_from)
);

CREATE TABLE IF NOT EXISTS plans (
  plan_id VARCHAR NOT NULL,
  kind VARCHAR NOT NULL,
  status VARCHAR NOT NULL,
  created_at TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  fingerprint VARCHAR NOT NULL,
  body JSON NOT NULL,
  progress JSON,
  PRIMARY KEY (plan_id)
);

CREATE TABLE IF NOT EXISTS audit_log (
  seq BIGINT NOT NULL,
  occurred_at TIMESTAMPTZ NOT NULL,
  actor VARCHAR NOT NULL,
  plan_id VARCHAR,
  action VARCHAR NOT NULL,
  object VARCHAR,
  before_state JSON,
  after_state JSON,
  result VARCHAR NOT NULL,
  detail VARCHAR
);

CREATE TABLE IF NOT EXISTS watermarks (
  source VARCHAR NOT NULL,
  watermark TIMESTAMPTZ NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (source)
);

CREATE TABLE IF NOT EXISTS report_issues (
  period VARCHAR NOT NULL,
  version INTEGER NOT NULL,
  finalized_at TIMESTAMPTZ NOT NULL,
  manifest_sha256 VARCHAR NOT NULL,
  inputs_sha256 VARCHAR NOT NULL,
  fleet_cost DOUBLE NOT NULL,
  reason VARCHAR,
  path VARCHAR,
  PRIMARY KEY (period, version)
);

CREATE TABLE IF NOT EXISTS report_lines (
  period VARCHAR NOT NULL,
  version INTEGER NOT NULL,
  line_no INTEGER NOT NULL,
  line VARCHAR NOT NULL,
  for_period VARCHAR NOT NULL,
  team VARCHAR,
  model VARCHAR,
  sharing_mode VARCHAR,
  card_hours DOUBLE NOT NULL,
  list_cost DOUBLE NOT NULL,
  sharing_discount DOUBLE NOT NULL,
  utilization_adjustment DOUBLE NOT NULL,
  redistributed_cost DOUBLE NOT NULL,
  cost DOUBLE NOT NULL,
  idle_card_hours DOUBLE NOT NULL,
  idle_cost DOUBLE NOT NULL,
  PRIMARY KEY (period, version, line_no)
);

CREATE SEQUENCE IF NOT EXISTS audit_seq START 1;

CREATE INDEX IF NOT EXISTS gpu_samples_ts ON gpu_samples (ts);

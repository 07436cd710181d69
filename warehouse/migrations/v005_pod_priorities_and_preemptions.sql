-- v005: pod priorities (PriorityClass name and value per GPU pod) and preemptions (each GPU pod
-- a scheduler preempted or evicted, with what it had run), for --by priority_class and the
-- 'GPU-hours lost to preemption' lines (docs/decisions/0092).
CREATE TABLE IF NOT EXISTS pod_priorities (
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  priority_class VARCHAR,
  priority INTEGER,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (namespace, pod)
);
CREATE TABLE IF NOT EXISTS preemptions (
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  preempted_at TIMESTAMPTZ NOT NULL,
  source VARCHAR NOT NULL,
  reason VARCHAR,
  owner_kind VARCHAR,
  owner_name VARCHAR,
  node VARCHAR,
  queue VARCHAR,
  priority_class VARCHAR,
  gpus DOUBLE,
  run_start TIMESTAMPTZ,
  checkpoint_at TIMESTAMPTZ,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (namespace, pod)
);

-- v014: node configuration with its validity interval (issue 31 item 7, docs/decisions/0207).
-- `nodes` keeps one row per node as last collected (the readers of "now"); `node_history` keeps
-- each configuration a node had from its `valid_from` on, so an hour is priced by the labels in
-- force then, not by the last collect. An upgraded file starts with one row per node (its
-- stored labels, which then stand for every hour: the bill is what it was before the upgrade).
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS valid_from TIMESTAMPTZ;
CREATE TABLE IF NOT EXISTS node_history (
  node VARCHAR NOT NULL,
  valid_from TIMESTAMPTZ NOT NULL,
  pool VARCHAR,
  model VARCHAR,
  gpu_count INTEGER,
  sharing_mode VARCHAR,
  replicas INTEGER,
  mig_config VARCHAR,
  mig_config_state VARCHAR,
  labels JSON,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (node, valid_from)
);
INSERT OR IGNORE INTO node_history
SELECT node, coalesce(observed_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), pool, model, gpu_count,
       sharing_mode, replicas, mig_config, mig_config_state, labels, observed_at
FROM nodes;

-- v013: workloads seen waiting, with the status their controllers wrote (Kueue Workload and
-- Volcano PodGroup conditions, PodScheduled and FailedScheduling, DRA claim allocation), and
-- each ClusterQueue's reserved quota (status.flavorsReservation) (docs/decisions/0201).
CREATE TABLE IF NOT EXISTS pending_workloads (
  kind VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  name VARCHAR NOT NULL,
  source VARCHAR NOT NULL,
  queue VARCHAR,
  owner_kind VARCHAR,
  owner_name VARCHAR,
  requests JSON,
  pods INTEGER,
  node_selector JSON,
  priority_class VARCHAR,
  conditions JSON,
  event_reason VARCHAR,
  event_message VARCHAR,
  nominated_node VARCHAR,
  claims JSON,
  created_at TIMESTAMPTZ,
  first_seen TIMESTAMPTZ,
  last_seen TIMESTAMPTZ,
  PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS queue_usage (
  cluster_queue VARCHAR NOT NULL,
  flavor VARCHAR NOT NULL,
  resource VARCHAR NOT NULL,
  total DOUBLE NOT NULL,
  borrowed DOUBLE,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (cluster_queue, flavor, resource)
);

-- v004: Dynamic Resource Allocation (resource.k8s.io/v1): the devices DRA drivers publish in
-- ResourceSlices, the claims that hold them (billed from allocation to release), the pods that
-- reserve each claim, and which GPU plane (device plugin or DRA) each node is on.
CREATE TABLE IF NOT EXISTS dra_devices (
  driver VARCHAR NOT NULL,
  pool VARCHAR NOT NULL,
  device VARCHAR NOT NULL,
  node VARCHAR,
  kind VARCHAR NOT NULL,
  uuid VARCHAR,
  parent_uuid VARCHAR NOT NULL,
  profile VARCHAR,
  placement INTEGER,
  model VARCHAR,
  memory_mib DOUBLE,
  dynamic INTEGER NOT NULL,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (driver, pool, device)
);
CREATE TABLE IF NOT EXISTS dra_claims (
  claim_uid VARCHAR NOT NULL,
  request VARCHAR NOT NULL,
  driver VARCHAR NOT NULL,
  pool VARCHAR NOT NULL,
  device VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  claim VARCHAR NOT NULL,
  device_class VARCHAR,
  template VARCHAR,
  sharing VARCHAR NOT NULL,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (claim_uid, request, driver, pool, device, start_ts)
);
CREATE TABLE IF NOT EXISTS dra_reservations (
  claim_uid VARCHAR NOT NULL,
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (claim_uid, namespace, pod, start_ts)
);
CREATE TABLE IF NOT EXISTS node_planes (
  node VARCHAR NOT NULL,
  plane VARCHAR NOT NULL,
  dynamic_mig INTEGER NOT NULL,
  evidence VARCHAR,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (node)
);

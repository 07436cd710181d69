-- v007: the pod-claim join from kube-state-metrics' kube_pod_resourceclaim_info (which pods
-- referenced which ResourceClaims when), used where the API's reservations were not collected.
CREATE TABLE IF NOT EXISTS dra_pod_claims (
  namespace VARCHAR NOT NULL,
  pod VARCHAR NOT NULL,
  claim VARCHAR NOT NULL,
  template VARCHAR,
  start_ts TIMESTAMPTZ NOT NULL,
  end_ts TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (namespace, pod, claim, start_ts)
);

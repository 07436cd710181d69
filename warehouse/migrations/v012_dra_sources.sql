-- v012: where each DRA device and claim row came from (docs/decisions/0163): `api` (the
-- Kubernetes API's objects) or `prometheus` (rebuilt from dcgm-exporter's dra_* labels and
-- kube-state-metrics' claim series where no API listing covers it). NULL on older rows, which
-- only the API wrote.
ALTER TABLE dra_devices ADD COLUMN source VARCHAR;
ALTER TABLE dra_claims ADD COLUMN source VARCHAR;

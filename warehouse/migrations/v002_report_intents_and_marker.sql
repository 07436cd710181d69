-- v002: report issue intents (recorded before a version folder is renamed into place, so crash
-- recovery adopts only folders the warehouse expected) and gpuledger's file marker (a writer
-- refuses a non-empty DuckDB file without it: another application's file is left alone).
CREATE TABLE IF NOT EXISTS report_intents (
  period VARCHAR NOT NULL,
  version INTEGER NOT NULL,
  recorded_at TIMESTAMPTZ NOT NULL,
  manifest_sha256 VARCHAR NOT NULL,
  inputs_sha256 VARCHAR NOT NULL,
  signature VARCHAR,
  previous_manifest_sha256 VARCHAR,
  coverage DOUBLE,
  path VARCHAR,
  PRIMARY KEY (period, version)
);
CREATE TABLE IF NOT EXISTS gpuledger_meta (
  key VARCHAR NOT NULL,
  value VARCHAR NOT NULL,
  PRIMARY KEY (key)
);
INSERT INTO gpuledger_meta VALUES ('application', 'gpuledger');

-- v010: stored facts remember their rules (docs/decisions/0147). The roll-up's rows carry the
-- fingerprint of the rules they were computed under (`rules`; NULL on rows stored before this
-- step: rules not recorded); `rollup_hours` says it once per rolled-up hour, for a bill to read
-- without scanning the roll-up; `rule_sets` holds the full rules of every fingerprint stored.
ALTER TABLE allocations ADD COLUMN rules VARCHAR;
ALTER TABLE card_hours_hourly ADD COLUMN rules VARCHAR;
CREATE TABLE IF NOT EXISTS rollup_hours (
  ts TIMESTAMPTZ NOT NULL,
  rules VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS rule_sets (
  fingerprint VARCHAR NOT NULL,
  rules JSON NOT NULL,
  first_used TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (fingerprint)
);

-- v015: namespace team labels with their validity interval (issue 31 item 7, docs/decisions/0226).
-- `namespaces` keeps one row per namespace as last observed (the readers of "now"); the history
-- keeps each team and label set a namespace had from its `valid_from` on, so a day is billed to
-- the team in force then, not to the last collect's. An upgraded file starts with one row per
-- namespace (its stored team, which then stands for every day: the bill is what it was before).
CREATE TABLE IF NOT EXISTS namespace_history (
  namespace VARCHAR NOT NULL,
  valid_from TIMESTAMPTZ NOT NULL,
  team VARCHAR,
  labels JSON,
  observed_at TIMESTAMPTZ,
  PRIMARY KEY (namespace, valid_from)
);
INSERT OR IGNORE INTO namespace_history
SELECT namespace, coalesce(observed_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), team, labels, observed_at
FROM namespaces;

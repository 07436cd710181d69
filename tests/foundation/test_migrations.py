"""Frozen schema migrations: literal DDL steps that add up to what `core.frames` declares.

Cases:
- every step applied to an empty file gives the same DuckDB catalog (tables, columns in order,
  types, nullability, defaults, keys and other constraints, indexes, sequences) as running the
  DDL the code declares (`core.frames` tables plus `schema.SUPPORT_DDL`) on another empty file;
- that comparison really catches drift: a column declared in `core.frames` without a step makes
  the catalogs differ, naming the column;
- released steps are frozen (pinned checksums), numbered 1..N without gaps, each file listed;
- a v1 file as the previous release wrote it (built here from literal SQL, with rows in it)
  opens, is brought to the latest version (v2: the gpuledger marker row, the report intents
  table) and keeps its rows; a later step migrates it in place
  (rows kept, the new column NULL), runs once, and a step that fails midway leaves it at v1.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from gpuledger.core.frames import TABLES, Column
from gpuledger.warehouse import LoadBatch, Warehouse, migrations, schema, store
from tests.foundation.released_files import PREVIOUS_RELEASE_BOOTSTRAP

MIGRATIONS_DIR = Path(migrations.__file__).parent

RELEASED_SHA256 = {
    "v001_initial.sql": "b73191fee8d7a76a0f42e21d283e293a4aceec6084d5ecacab2d33f5ace45868",
    "v002_report_intents_and_marker.sql": "9f90e6d974d4a9797953bd506a8aa27e3730e607690137b894eada773a3d6d08",
    "v003_samples_without_ts_index.sql": "f3f8d315c33b12caa4a7122e83298839a3fe3b1cbf1805404700fe66c6609792",
    "v004_dra_claims.sql": "d0096157ae3e0be8ec3ca665ee3fa9b5061b1e46ea98aeb6db15e7717fb783a3",
    "v005_pod_priorities_and_preemptions.sql": "24e360c3e9bfe4272bd6c433df45273b4260483331c1cc8d9a044a81bd46c33a",
    "v006_vllm_queue_gauges.sql": "4bcab45e999d9939d71b544dac1a992fa8ac13d5c02ec5c41b5cf1c8ccdf76b3",
    "v007_dra_pod_claims.sql": "3be5d18c27e01ac87d562b282020d4ed809170c93fa04e99e629b3b99b3a5a7f",
    "v008_gpu_series_and_sample_values.sql": "c15ae288f7abf9bfeb2fc8ce7895ce1840fcc017e7979248c45702df55412f17",
    "v009_coarse_unread_sample_values.sql": "823c1315164b9d6abc23d24d8e0917a67351c656c7994b83f1987f5cd938b062",
}
"""sha256 of every released step; a step is never edited once released (add a new one)."""


NOV = datetime(2026, 11, 1, tzinfo=UTC)


def catalog(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    """The parts of DuckDB's catalog a schema consists of (the version table excluded)."""
    own = "table_name <> 'schema_version'"
    queries = {
        "tables": f"SELECT table_name, temporary FROM duckdb_tables() WHERE {own} ORDER BY 1",
        "columns": (
            "SELECT table_name, column_index, column_name, data_type, is_nullable, column_default "
            f"FROM duckdb_columns() WHERE NOT internal AND {own} ORDER BY 1, 2"
        ),
        "constraints": (
            "SELECT table_name, constraint_type, constraint_column_names, expression "
            f"FROM duckdb_constraints() WHERE {own} ORDER BY ALL"
        ),
        "indexes": (
            "SELECT index_name, table_name, is_unique, is_primary, expressions "
            "FROM duckdb_indexes() ORDER BY 1"
        ),
        "sequences": (
            "SELECT sequence_name, start_value, increment_by, min_value, max_value, cycle "
            "FROM duckdb_sequences() ORDER BY 1"
        ),
        "views": "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1",
        "view_columns": (
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_name IN (SELECT view_name FROM duckdb_views() WHERE NOT internal) "
            "ORDER BY table_name, ordinal_position"
        ),
    }
    return {name: con.sql(q).fetchall() for name, q in queries.items()}


def declared_catalog(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect(str(path))
    try:
        for statement in schema.declared_ddl():
            con.execute(statement)
        return catalog(con)
    finally:
        con.close()


def migrated_catalog(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Warehouse.open(path) as wh:
        return catalog(wh.con)


def test_all_steps_on_an_empty_file_equal_the_declared_schema(tmp_path: Path):
    migrated = migrated_catalog(tmp_path / "migrated.duckdb")
    declared = declared_catalog(tmp_path / "declared.duckdb")
    for part in declared:
        assert migrated[part] == declared[part], part
    tables = {name for name, _ in migrated["tables"]}
    # gpu_samples is a view over a series dimension and its values since v8; the samples'
    # fingerprints per day since v18, the roll-ups', allocations' and queue samples' since v19.
    assert tables == {*TABLES, schema.MARKER_TABLE, "gpu_series", "gpu_sample_values",
                      "gpu_sample_fingerprints", "token_sample_fingerprints",
                      *(f"{t}_fingerprints" for t in ("card_hours_hourly", "card_hours_daily", "allocations",
                                                     "queue_samples"))} - {"gpu_samples"}
    assert migrated["views"] == declared["views"] == [("gpu_samples",)]
    assert [i[0] for i in migrated["indexes"]] == []  # v3 dropped gpu_samples_ts (zone maps)
    assert [s[0] for s in migrated["sequences"]] == ["audit_seq"]
    with Warehouse.open(tmp_path / "migrated.duckdb", read_only=True) as wh:
        versions = wh.query("SELECT version FROM schema_version ORDER BY version")["version"]
    assert versions.to_list() == [v for v, _, _ in schema.MIGRATIONS]


def test_the_comparison_catches_a_column_declared_without_a_step(tmp_path: Path, monkeypatch):
    spec = TABLES["namespaces"]
    grown = replace(spec, columns=(*spec.columns, Column("cost_center", "VARCHAR")))
    monkeypatch.setattr(schema, "TABLES", {**TABLES, "namespaces": grown})
    migrated = migrated_catalog(tmp_path / "migrated.duckdb")
    declared = declared_catalog(tmp_path / "declared.duckdb")
    assert migrated["tables"] == declared["tables"]
    missing = set(declared["columns"]) - set(migrated["columns"])
    assert [(c[0], c[2]) for c in missing] == [("namespaces", "cost_center")]


def test_released_steps_are_frozen_numbered_and_listed():
    listed = [step.file for step in migrations.STEPS]
    assert migrations.step_files() == sorted(listed), "every .sql step must be listed in STEPS"
    assert [step.version for step in migrations.STEPS] == list(range(1, len(listed) + 1))
    for step in migrations.STEPS:
        match = migrations.FILE_NAME.fullmatch(step.file)
        assert match and int(match.group(1)) == step.version, step.file
    for name, pinned in RELEASED_SHA256.items():
        text = (MIGRATIONS_DIR / name).read_bytes()
        assert hashlib.sha256(text).hexdigest() == pinned, (
            f"{name} was released and is frozen: add a new step instead of editing it"
        )


def _previous_release_file(path: Path) -> None:
    """A warehouse exactly as gpuledger 0.1.0 left it: v1 DDL, its version row, and data."""
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    con.execute(PREVIOUS_RELEASE_BOOTSTRAP)
    con.execute((MIGRATIONS_DIR / "v001_initial.sql").read_text())
    con.execute("INSERT INTO schema_version VALUES (1, 'initial schema', ?)", [NOV])
    con.execute("INSERT INTO namespaces VALUES ('ml', 'vision', '{\"team\": \"vision\"}', ?)", [NOV])
    con.execute(
        "INSERT INTO gpu_samples (ts, node, uuid, gpu_i_id, namespace, pod, gr_engine_active) "
        "VALUES (?, 'n1', 'GPU-1', -1, 'ml', 'p', 0.75)", [NOV]
    )
    con.execute(
        "INSERT INTO audit_log (seq, occurred_at, actor, action, result) "
        "VALUES (nextval('audit_seq'), ?, 'alice', 'approve', 'ok')", [NOV]
    )
    con.close()


def _rows(wh: Warehouse) -> tuple[list[tuple[Any, ...]], ...]:
    return (
        wh.query("SELECT namespace, team, labels, observed_at FROM namespaces").rows(),
        wh.query("SELECT ts, uuid, namespace, gr_engine_active FROM gpu_samples").rows(),
        wh.query("SELECT seq, actor FROM audit_log").rows(),
    )


EXPECTED_ROWS = (
    [("ml", "vision", '{"team": "vision"}', NOV)],
    [(NOV, "GPU-1", "ml", 0.75)],
    [(1, "alice")],
)


def test_a_v1_file_from_the_previous_release_opens_with_its_rows(tmp_path: Path):
    path = tmp_path / "v1.duckdb"
    _previous_release_file(path)
    with Warehouse.open(path) as wh:
        assert schema.current_version(wh.con) == schema.LATEST
        assert _rows(wh) == EXPECTED_ROWS
        # v2 marked the file as gpuledger's and added the (empty) report intents.
        assert wh.query("SELECT key, value FROM gpuledger_meta").rows() == [("application", "gpuledger")]
        assert wh.count("report_intents") == 0
        assert wh.append_audit({"occurred_at": NOV, "actor": "bob", "action": "apply", "result": "ok"}) == 2
        ns = pl.DataFrame({"namespace": ["web"], "team": ["shop"], "labels": ["{}"], "observed_at": [NOV]})
        wh.load(LoadBatch({"namespaces": ns}))
        assert wh.count("namespaces") == 2
    with Warehouse.open(path, read_only=True) as ro:
        assert _rows(ro)[1] == EXPECTED_ROWS[1]


def _with_step(monkeypatch, sql: str) -> None:
    """Pretend the next release adds step LATEST+1 with this DDL."""
    latest = schema.LATEST + 1
    step = (latest, "probe step", schema.SqlMigration(sql))
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, step))
    monkeypatch.setattr(schema, "LATEST", latest)
    monkeypatch.setattr(store, "LATEST", latest)


def test_a_later_step_migrates_a_v1_file_once_and_keeps_its_rows(tmp_path: Path, monkeypatch):
    path = tmp_path / "v1.duckdb"
    _previous_release_file(path)
    _with_step(monkeypatch, "ALTER TABLE namespaces ADD COLUMN cost_center VARCHAR;\n"
                            "ALTER TABLE gpu_sample_values ADD COLUMN nvlink_bytes DOUBLE;")
    with Warehouse.open(path) as wh:
        assert schema.current_version(wh.con) == schema.LATEST
        assert _rows(wh) == EXPECTED_ROWS
        assert wh.query("SELECT cost_center FROM namespaces").rows() == [(None,)]
        assert wh.query("SELECT nvlink_bytes FROM gpu_sample_values").rows() == [(None,)]
    # Reopening applies nothing again (the ALTER would fail if it ran twice).
    with Warehouse.open(path) as wh:
        described = wh.query("SELECT description FROM schema_version ORDER BY version")
        released = [description for _, description, _ in schema.MIGRATIONS[:-1]]
        assert described["description"].to_list() == [*released, "probe step"]


def test_a_failing_step_leaves_the_file_at_its_old_version(tmp_path: Path, monkeypatch):
    path = tmp_path / "v1.duckdb"
    _previous_release_file(path)
    _with_step(monkeypatch, "ALTER TABLE namespaces ADD COLUMN cost_center VARCHAR;\n"
                            "ALTER TABLE no_such_table ADD COLUMN x INTEGER;")
    with pytest.raises(duckdb.CatalogException, match="no_such_table"):
        Warehouse.open(path)
    monkeypatch.undo()
    con = duckdb.connect(str(path), read_only=True)   # as it is on disk, before any new open
    try:
        assert schema.current_version(con) == 1
        assert "cost_center" not in con.sql("SELECT * FROM namespaces").columns
        assert "report_intents" not in {t for (t,) in con.sql("SHOW TABLES").fetchall()}
    finally:
        con.close()
    with Warehouse.open(path) as wh:   # the real next step still applies, rows kept
        assert schema.current_version(wh.con) == schema.LATEST
        assert _rows(wh) == EXPECTED_ROWS

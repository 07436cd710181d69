"""The one-home rules: YAML loading, the activity rule, the special bill lines.

Cases: a missing file and bad YAML each give one line naming the file (and the line number),
the caller's error class is honoured, an empty file is None; the SQL and the Polars forms of
the activity rule agree on rows with and without `gr_engine_active`; the special lines compare
equal to their strings and keep the bill's order.
"""

from pathlib import Path

import pytest

from gpuledger.analytics.billing.special_lines import SPECIAL_LINES, SpecialLine
from gpuledger.core.activity import ACTIVITY_SQL, activity_expr, activity_sql
from gpuledger.core.errors import ConfigError, InputError
from gpuledger.core.yamlfile import load_yaml_file


def test_yaml_missing_file_is_one_line(tmp_path: Path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="cannot read the fleet file") as info:
        load_yaml_file(path, what="fleet")
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_yaml_syntax_error_names_the_line_and_the_callers_class(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: line \d+ not valid YAML") as info:
        load_yaml_file(path, what="config", error=ConfigError)
    assert "\n" not in str(info.value)


def test_yaml_reads_mappings_and_empty_files(tmp_path: Path):
    path = tmp_path / "ok.yaml"
    path.write_text("nodes:\n  - name: a\n")
    assert load_yaml_file(path, what="fleet") == {"nodes": [{"name": "a"}]}
    path.write_text("")
    assert load_yaml_file(path, what="fleet") is None


def test_activity_sql_and_polars_agree():
    import duckdb
    import polars as pl

    frame = pl.DataFrame({"gr_engine_active": [0.25, None, None], "gpu_util": [90.0, 40.0, None]})
    by_sql = duckdb.sql(f"SELECT {ACTIVITY_SQL} AS a FROM frame").pl()["a"].to_list()
    qualified = duckdb.sql(f"SELECT {activity_sql('s')} AS a FROM frame s").pl()["a"].to_list()
    by_polars = frame.select(activity_expr().alias("a"))["a"].to_list()
    assert by_sql == qualified == by_polars == [0.25, 0.4, None]
    assert activity_sql() == ACTIVITY_SQL


def test_special_lines():
    assert SpecialLine.UNATTRIBUTED == "unattributed"
    assert f"{SpecialLine.SHARING_DISCOUNT}" == "sharing_discount"
    assert SPECIAL_LINES == ("unallocated", "unattributed", "sharing_discount")
    assert all(type(s) is str for s in SPECIAL_LINES)

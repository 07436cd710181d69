"""FOCUS as Parquet by default, CSV on request (`reports.focus_formats`, docs/decisions/0193).

Cases:
- default settings write `focus.parquet` only; `focus_formats: [parquet, csv]` writes both, with
  the same rows; `[csv]` alone writes only the CSV;
- the setting is read from YAML; an unknown format is one clear configuration error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpuledger.core.config import Settings, load_settings
from gpuledger.core.errors import ConfigError
from gpuledger.reports.focus import COLUMNS, write_focus


def _frame() -> pl.DataFrame:
    row = {name: None for name in COLUMNS}
    row.update(BilledCost=1.5, ChargePeriodStart=datetime(2024, 11, 1, tzinfo=UTC), SubAccountId="nlp")
    return pl.DataFrame([row, {**row, "BilledCost": 2.25}]).select(
        pl.col(n).cast(t) for n, t in COLUMNS.items())


def test_parquet_by_default_csv_on_request(tmp_path: Path) -> None:
    frame = _frame()
    (tmp_path / "a").mkdir()
    assert [p.name for p in write_focus(frame, tmp_path / "a", Settings().reports.focus_formats)] == ["focus.parquet"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["focus.parquet"]
    (tmp_path / "b").mkdir()
    written = write_focus(frame, tmp_path / "b", ("parquet", "csv"))
    assert sorted(p.name for p in written) == ["focus.csv", "focus.parquet"]
    csv = pl.read_csv(tmp_path / "b" / "focus.csv")
    assert csv.height == 2 and csv["BilledCost"].sum() == pytest.approx(1.5 + 2.25)
    assert csv["ChargePeriodStart"][0] == "2024-11-01T00:00:00Z"
    (tmp_path / "c").mkdir()
    assert [p.name for p in write_focus(frame, tmp_path / "c", ("csv",))] == ["focus.csv"]


def test_setting_from_yaml(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("reports:\n  focus_formats: [parquet, csv]\n")
    assert load_settings(good).reports.focus_formats == ("parquet", "csv")
    bad = tmp_path / "bad.yaml"
    bad.write_text("reports:\n  focus_formats: [xlsx]\n")
    with pytest.raises(ConfigError) as err:
        load_settings(bad)
    assert "focus_formats" in str(err.value) and "\n" not in str(err.value).strip()

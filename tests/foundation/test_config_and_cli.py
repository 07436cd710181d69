"""Settings are loaded once and bad input gets one clear line; the CLI maps errors to exits.

Cases: the shipped example file validates; no file gives demo defaults; a bad key, a bad
value, bad YAML and a missing `${VAR}` each name the file and the key; secrets never appear in
the settings' repr; the price book splits at an effective date and refuses unpriced models;
`gpuledger --help` does not import the heavy libraries; a `GpuledgerError` becomes one line on
stderr with a non-zero exit (traceback only with --debug); roles resolve from users and groups.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from gpuledger.core.access import resolve_roles
from gpuledger.core.config import PriceEntry, Settings, load_settings
from gpuledger.core.errors import ConfigError
from gpuledger.core.period import Period
from gpuledger.core.pricing import PriceBook
from gpuledger.core.window import Window

REPO = Path(__file__).resolve().parents[2]


def test_example_file_validates(monkeypatch):
    monkeypatch.setenv("PROMETHEUS_TOKEN", "s3cret-token")
    monkeypatch.setenv("GPULEDGER_REPORT_KEY", "s3cret-key")
    s = load_settings(REPO / "gpuledger.example.yaml")
    assert s.reports.signing_key is not None
    assert s.reports.signing_key.get_secret_value() == "s3cret-key"
    assert s.reports.min_coverage == 0.9
    assert s.prometheus.auth_header is not None
    assert s.prometheus.auth_header.get_secret_value() == "Bearer s3cret-token"
    assert "s3cret" not in repr(s) and "s3cret" not in str(s.model_dump())
    assert s.teams.fallback[0].team == "\\1"


def test_no_file_gives_defaults():
    s = load_settings(None)
    assert s.idle.threshold == 0.05 and s.idle.min_minutes == 30
    assert {p.model for p in s.price_book} >= {"H100-80GB", "A100-80GB", "H200-141GB"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("idle:\n  threshold: 2\n", r"idle\.threshold: Input should be less than or equal to 1"),
        ("reports:\n  min_coverage: 0\n", r"reports\.min_coverage: Input should be greater than 0"),
        ("reports:\n  min_coverage: 1.5\n", r"reports\.min_coverage: Input should be less than"),
        ("idle:\n  treshold: 0.1\n", r"idle\.treshold: Extra inputs are not permitted"),
        ("sharing:\n  discounts: {mig: 1.5}\n", r"sharing\.discounts: Value error, mig: discount factor"),
        ("prometheus:\n  step: 5 minutes\n", r"prometheus\.step"),
        ("idle: [1, 2\n", r"not valid YAML"),
        ("- just a list\n", r"expected a mapping"),
        ("prometheus:\n  auth_header: ${GPULEDGER_TEST_UNSET_VAR}\n", r"GPULEDGER_TEST_UNSET_VAR.*not set"),
    ],
)
def test_bad_files_get_one_line_naming_file_and_key(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_settings(path)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_price_book_splits_at_effective_date():
    s = Settings(price_book=(
        PriceEntry(model="H100-80GB", unit_price=3.0, effective_from=date(2026, 1, 1)),
        PriceEntry(model="H100-80GB", unit_price=2.0, effective_from=date(2026, 11, 16)),
    ))
    spans = list(PriceBook(s).spans("H100-80GB", Period.exact("2026-11").window))
    assert [(sp.start.day, sp.end.day if sp.end else None, sp.unit_price) for sp in spans] == [
        (1, 16, 3.0), (16, 1, 2.0),
    ]
    with pytest.raises(ConfigError, match="no price for GPU model 'T4'"):
        list(PriceBook(s).spans("T4", Period.exact("2026-11").window))
    with pytest.raises(ConfigError, match="no price effective at 2025"):
        list(PriceBook(s).spans("H100-80GB", Window(datetime(2025, 12, 31, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))))


def test_roles_resolve_from_users_and_groups():
    s = Settings.model_validate({"access": {"roles": [
        {"subject": "admins", "kind": "group", "role": "admin"},
        {"subject": "lee", "role": "lead", "team": "vision"},
    ]}})
    lee = resolve_roles("lee", [], s.access)
    assert not lee.admin and lee.can_see_team("vision") and not lee.can_see_team("speech")
    root = resolve_roles("ann", ["admins", "x"], s.access)
    assert root.admin and root.can_see_team("speech")
    assert not resolve_roles("stranger", [], s.access).known


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys; from gpuledger.cli import build_parser; build_parser(); "
        "heavy = [m for m in ('duckdb', 'polars', 'ortools', 'dash', 'sklearn', 'kubernetes', 'plotly') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_errors_are_one_line_and_nonzero(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("idle:\n  threshold: 7\n")
    cmd = [sys.executable, "-m", "gpuledger", "--config", str(bad), "plans"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("gpuledger: error: ") and "idle.threshold" in result.stderr
    debug = subprocess.run([*cmd, "--debug"], capture_output=True, text=True, cwd=tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr

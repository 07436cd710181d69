"""`gpuledger bill` says when a window holds no data (issue 22, "say when data is missing").

Cases (a warehouse with two hours of samples from T0, in-process CLI):
- a window after the data: exit 0, the all-zero bill, and one warning naming the empty window
  and the range the warehouse covers;
- a window that holds the data: no such warning;
- an empty warehouse file: the warning says it holds no samples yet.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.warehouse import Warehouse
from tests.analytics.builders import T0, Seg, at, gpus, load, namespaces, samples, window


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    frames = {
        "gpus": gpus({"uuid": "GPU-1"}),
        "gpu_samples": samples([Seg("GPU-1", at(0), at(2), "ml", "p1", act=0.5)]),
        "namespaces": namespaces({"ml": "vision"}),
    }
    return load(tmp_path / "cov.duckdb", window(2), frames)


def _bill(path: Path, start: str, end: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["--warehouse", str(path), "bill", "--start", start, "--end", end])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.startswith("gpuledger: warning:")]


def test_window_after_the_data_warns_with_the_covered_range(warehouse: Path, capsys) -> None:
    start, end = at(days=3), at(days=4)
    code, warnings = _bill(warehouse, start.isoformat(), end.isoformat(), capsys)
    assert code == 0
    assert len(warnings) == 1
    assert f"no samples in [{start:%Y-%m-%dT%H:%MZ}, {end:%Y-%m-%dT%H:%MZ})" in warnings[0]
    assert f"covers {T0:%Y-%m-%dT%H:%MZ} .. {at(minutes=119):%Y-%m-%dT%H:%MZ}" in warnings[0]


def test_window_with_data_does_not_warn(warehouse: Path, capsys) -> None:
    code, warnings = _bill(warehouse, at(0).isoformat(), at(2).isoformat(), capsys)
    assert code == 0
    assert warnings == []


def test_empty_warehouse_says_so(tmp_path: Path, capsys) -> None:
    path = tmp_path / "empty.duckdb"
    Warehouse.open(path).close()
    code, warnings = _bill(path, at(0).isoformat(), at(2).isoformat(), capsys)
    assert code == 0
    assert len(warnings) == 1 and "holds no samples yet" in warnings[0]

"""The dcgm-exporter counters we ship enable exactly the fields the collector reads.

Cases:
- `deploy/dcgm-exporter/gpuledger-counters.csv` lists every DCGM field of `core.frames`
  (SM_ACTIVE included, which dcgm-exporter's default CSV lacks), each as a gauge;
- the ConfigMap carries the same CSV text.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuledger.core.frames import DCGM_FIELDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "dcgm-exporter"


def _fields(text: str) -> list[tuple[str, str]]:
    rows = [line.split(",") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [(r[0].strip(), r[1].strip()) for r in rows]


def test_counters_csv_enables_every_field() -> None:
    rows = _fields((DEPLOY / "gpuledger-counters.csv").read_text())
    assert sorted(name for name, _ in rows) == sorted(DCGM_FIELDS)
    assert {kind for _, kind in rows} == {"gauge"}


def test_configmap_carries_the_csv() -> None:
    config = yaml.safe_load((DEPLOY / "configmap.yaml").read_text())
    assert config["kind"] == "ConfigMap"
    assert config["data"]["gpuledger-counters.csv"].strip() == (DEPLOY / "gpuledger-counters.csv").read_text().strip()

"""`gpuledger collect` adds what it dropped, by reason, to the totals `gpuledger serve` exports as
`gpuledger_collect_dropped_samples_total` (core.collect_stats, beside the warehouse).

The fleet is the HA-replica fleet of tests/collectors/test_gaps_and_duplicates.py (a real
Prometheus, two replicas answering every series): the truth is the number of instants both
replicas answered, computed from its layout, not by the collector.
"""

from __future__ import annotations

import pytest
import yaml

from gpuledger.cli import main
from gpuledger.core import collect_stats
from tests.collectors.test_gaps_and_duplicates import STEP, WINDOW, _instants, _present, prom_url

__all__ = ["prom_url"]  # the fixture, shared with the collector tests
pytestmark = pytest.mark.prometheus


def test_collect_records_dropped_samples_by_reason(prom_url, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"prometheus": {"chunk": "1d", "step": f"{STEP}s", "retries": 1}}))
    warehouse = tmp_path / "w.duckdb"
    argv = ["--config", str(config), "--warehouse", str(warehouse), "collect", "--prometheus", prom_url,
            "--start", WINDOW.start.isoformat(), "--end", WINDOW.end.isoformat()]
    both = sum(1 for gpu in ("GPU-h0", "GPU-h1") for at in _instants()
               if _present(gpu, at, "r0") and _present(gpu, at, "r1"))
    assert both > 0
    assert main(argv) == 0
    assert collect_stats.read(warehouse) == {"ha_duplicate": both}
    assert main(argv) == 0  # up to date: nothing read, nothing added
    assert collect_stats.read(warehouse) == {"ha_duplicate": both}
    assert main([*argv, "--reload"]) == 0
    assert collect_stats.read(warehouse) == {"ha_duplicate": 2 * both}

"""An OpenMetrics file of gauge samples for a real Prometheus to ingest (the conformance tests
replay upstream `.prom` fixtures at fixed times through it)."""

from __future__ import annotations

from pathlib import Path


def write_gauges(path: Path, by_metric: dict[str, list[str]]) -> Path:
    """`path` holding each metric's `# TYPE` line and its samples (`name{labels} value ts`)."""
    lines: list[str] = []
    for metric, samples in by_metric.items():
        lines += [f"# TYPE {metric} gauge", *samples]
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path

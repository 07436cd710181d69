"""Where the mixin's generated files live, and their text."""

from __future__ import annotations

import json
from pathlib import Path

from tools.mixin import dashboard, rules

ROOT = Path(__file__).resolve().parents[2]
CHART_FILES = ROOT / "deploy" / "helm" / "gpuledger" / "files"
RULES = CHART_FILES / "gpuledger-rules.yaml"
DASHBOARD = CHART_FILES / "gpuledger-dashboard.json"
"""In the chart (its PrometheusRule and dashboard ConfigMap embed them); deploy/prometheus/ and
deploy/grafana/ hold links to them for installs without Helm."""


def render() -> dict[Path, str]:
    return {
        RULES: rules.render(),
        DASHBOARD: json.dumps(dashboard.build(), indent=2, ensure_ascii=False) + "\n",
    }


def write() -> list[Path]:
    out = []
    for path, text in render().items():
        path.write_text(text)
        out.append(path)
    return out


def stale() -> list[Path]:
    """Generated files that differ from what `render` writes."""
    return [path for path, text in render().items() if not path.exists() or path.read_text() != text]

"""deploy/*.yaml (the `kubectl apply -k deploy/` install) generated from the Helm chart.

Why generated: the chart is the one source of gpuledger's manifests; the kustomize files stay
for users without Helm, rendered from the chart's default values with the namespace included
and without the Prometheus Operator objects (which need its CRDs). Helm's own bookkeeping
(`helm.sh/chart`, `managed-by: Helm`, the config and Secret checksums) is dropped. A test
(tests/deploy/test_kustomize.py) fails when a file differs from what this renders; refresh them
with `python -m tools.helm_build kustomize`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpuledger"
DEPLOY = ROOT / "deploy"
FILES: dict[str, tuple[str, ...]] = {
    "namespace.yaml": ("namespace.yaml",),
    "rbac.yaml": ("rbac.yaml",),
    "config.yaml": ("configmap.yaml", "pvc.yaml"),
    "dashboard.yaml": ("deployment.yaml", "service.yaml"),
    "cronjob-collect.yaml": ("cronjob-collect.yaml",),
    "cronjob-report.yaml": ("cronjob-report.yaml",),
    "cronjob-compact.yaml": ("cronjob-compact.yaml",),
}
VALUES = ["--set", "namespace.create=true", "--set", "serviceMonitor.enabled=false",
          "--set", "prometheusRule.enabled=false"]
HEADER = ("# Generated from deploy/helm/gpuledger (default values) by `python -m tools.helm_build "
          "kustomize`:\n# edit the chart, not this file. `kubectl apply -k deploy/` installs these.\n")
_HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


def _strip(node: Any) -> Any:
    """Drop Helm's bookkeeping labels and annotations, wherever they are."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _HELM_LABELS or key in ("checksum/config", "checksum/secret"):
                continue
            cleaned = _strip(value)
            if key == "annotations" and not cleaned:
                continue
            out[key] = cleaned
        return out
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def render(helm: str) -> dict[str, str]:
    """File name → content, as `write` would store them."""
    out: dict[str, str] = {}
    for name, templates in FILES.items():
        args = [helm, "template", "gpuledger", str(CHART), "--namespace", "gpuledger", *VALUES]
        for template in templates:
            args += ["--show-only", f"templates/{template}"]
        done = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120)
        docs = [_strip(d) for d in yaml.safe_load_all(done.stdout) if d]
        body = "---\n".join(yaml.safe_dump(d, sort_keys=False, width=110) for d in docs)
        out[name] = HEADER + body
    return out


def write(helm: str) -> list[Path]:
    written = []
    for name, text in render(helm).items():
        path = DEPLOY / name
        path.write_text(text)
        written.append(path)
    return written

"""deploy/*.yaml, the kustomize install, is exactly what the chart renders (one source).

The RBAC in deploy/rbac.yaml, and so the rendered chart's, is exercised with real
ServiceAccount tokens by tests/actuator/test_deploy_rbac.py.
"""

from __future__ import annotations

from tests.deploy.chart import helm
from tools.helm_build.kustomize import DEPLOY, render


def test_kustomize_files_are_generated_from_the_chart():
    for name, text in render(helm()).items():
        assert (DEPLOY / name).read_text() == text, (
            f"deploy/{name} differs from the chart: run `python -m tools.helm_build kustomize`")

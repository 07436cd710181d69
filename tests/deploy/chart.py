"""Render the Helm chart with the helm built from Go modules (`tools.helm_build`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.helm_build.builder import HelmBuildError, HelmLayout, build, default_cache_root

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpuledger"
RULES = CHART / "files" / "gpuledger-rules.yaml"

VARIANTS: dict[str, list[str]] = {
    "default": [],
    # No auth proxy (an ingress authenticates), Prometheus token from a Secret, an existing claim.
    "no-proxy": [
        "--set", "authProxy.enabled=false", "--set-json", 'trustedProxyAddresses=["10.0.0.7"]',
        "--set", "prometheus.authSecret.name=prometheus-token", "--set", "persistence.existingClaim=wh",
        "--set", "kubernetes.migConfigMapNamespace=nvidia", "--set", "kubernetes.migConfigMapName=mig-cfg",
    ],
    # A plain install without the operator's CRDs and without a volume, with a price book and budgets.
    "minimal": [
        "--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false",
        "--set", "persistence.enabled=false", "--set", "report.enabled=false",
        "--set", "namespace.create=true",
        "--set-json", 'priceBook=[{"model":"H100-80GB","unit_price":3.2,"effective_from":"2026-01-01"}]',
        "--set-json", 'teams.budgets={"nlp":20000,"vision":5000}',
        "--set-json", 'roles=[{"subject":"leo","kind":"user","role":"lead","team":"nlp"}]',
    ],
    # Every value the chart gained for issue 33 / 31.4 set at once (test_chart_values.py reads
    # what each did): ingress, ServiceAccounts with IRSA annotations, pod metadata, extra env and
    # volumes, scheduling, ServiceMonitor relabelings, camelCase plans and price book, the
    # secret settings (two chart-made, one from an existing Secret), the lake publish CronJob.
    "full": [
        "--set-json", 'ingress={"enabled":true,"className":"nginx","annotations":{"a.example/x":"1"},'
                      '"hosts":[{"host":"gl.example.com","paths":[{"path":"/","pathType":"Prefix"}]}],'
                      '"tls":[{"secretName":"gl-tls","hosts":["gl.example.com"]}]}',
        "--set-json", 'serviceAccount={"create":true,"name":"gl-app","collectorName":"gl-reader",'
                      '"annotations":{"eks.amazonaws.com/role-arn":"arn:aws:iam::123456789012:role/gl"}}',
        "--set-json", 'podAnnotations={"example.com/scrape":"no"}',
        "--set-json", 'podLabels={"cost-center":"platform"}',
        "--set-json", 'extraEnv=[{"name":"AWS_REGION","value":"eu-west-1"}]',
        "--set-json", 'extraVolumes=[{"name":"ca","configMap":{"name":"corp-ca"}}]',
        "--set-json", 'extraVolumeMounts=[{"name":"ca","mountPath":"/etc/ssl/corp","readOnly":true}]',
        "--set-json", 'nodeSelector={"node-role.example.com/infra":"true"}',
        "--set-json", 'tolerations=[{"key":"infra","operator":"Exists","effect":"NoSchedule"}]',
        "--set-json", 'affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{'
                      '"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch",'
                      '"operator":"In","values":["amd64"]}]}]}}}',
        "--set-json", 'serviceMonitor.relabelings=[{"action":"replace","targetLabel":"cluster","replacement":"prod-eu"}]',
        "--set-json", 'serviceMonitor.metricRelabelings=[{"action":"drop","sourceLabels":["__name__"],'
                      '"regex":"gpuledger_http_request_duration_seconds_bucket"}]',
        "--set-json", 'plans={"expireAfterHours":48,"stateTimeoutSeconds":600,"nodesInParallel":2}',
        "--set-json", 'priceBook=[{"model":"H100-80GB","unitPrice":3.1,"effectiveFrom":"2026-01-01"}]',
        "--set", "prometheus.authHeader=Bearer full-prom-t0ken",
        "--set", "report.signingKey=full-signing-k3y",
        "--set", "budgetAlerts.webhookSecret.name=gl-hooks",
        "--set", "publish.enabled=true", "--set", "publish.lake=s3://org-lake/gpu",
        "--set", "publish.cluster=prod-eu",
        "--set", "grafanaDashboard.enabled=true", "--set", "currency=EUR",
    ],
}


def helm_layout() -> HelmLayout:
    """helm and the monitoring CRDs, built first where they are not: a no-op once built, and a wait
    while `.ci/run`'s background build holds the build lock (decision 0253)."""
    layout = HelmLayout(default_cache_root())
    try:
        build(layout)
    except HelmBuildError as exc:
        pytest.fail(str(exc))
    return layout


def helm() -> str:
    return str(helm_layout().binary)


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, check=False, timeout=120)


def render(variant: str = "default", release: str = "gpuledger", namespace: str = "gpuledger") -> list[dict[str, Any]]:
    return render_args(VARIANTS[variant], release, namespace)


def render_args(args: list[str], release: str = "gpuledger", namespace: str = "gpuledger") -> list[dict[str, Any]]:
    """The chart rendered with these `helm template` value arguments."""
    done = run_helm("template", release, str(CHART), "--namespace", namespace, *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]

"""Fixtures for the lake tests: three simulated cluster warehouses (built once), a local lake
they are published to, a real S3-compatible server (tools/s3_server), and the reference bills
each cluster computes from its own warehouse, without the lake."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuledger.analytics.billing.bill import Bill, compute_bill
from gpuledger.core.period import Period
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.lake.location import Lake
from tests.lake.fleets import AFTER, CLUSTERS, PERIOD, ClusterCase, build_warehouse


@pytest.fixture(scope="session")
def warehouses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One warehouse file per simulated cluster (read them, never write them)."""
    root = tmp_path_factory.mktemp("lake-clusters")
    return {c.name: build_warehouse(c, root / f"{c.name}.duckdb") for c in CLUSTERS}


def publish_all(lake: Lake, warehouses: dict[str, Path], **flags: bool) -> dict[str, object]:
    from gpuledger.reports.lake_publish import publish_month

    out = {}
    for case in CLUSTERS:
        with Warehouse.open(warehouses[case.name], read_only=True) as wh:
            out[case.name] = publish_month(wh, case.settings, lake, case.name, PERIOD, now=AFTER, **flags)
    return out


@pytest.fixture(scope="session")
def published_lake(tmp_path_factory: pytest.TempPathFactory, warehouses: dict[str, Path]) -> Lake:
    """The three clusters' November, published to a local lake (read it, never write it)."""
    lake = Lake.open(str(tmp_path_factory.mktemp("lake-shared") / "lake"))
    publish_all(lake, warehouses)
    return lake


@pytest.fixture
def fresh_lake(tmp_path: Path) -> Lake:
    return Lake.open(str(tmp_path / "lake"))


@pytest.fixture(scope="session")
def reference_bills(warehouses: dict[str, Path]) -> dict[tuple[str, tuple[str, ...]], Bill]:
    """Per cluster and `by`: the bill `gpuledger bill` prints from that cluster's warehouse."""
    window = Period.exact(PERIOD).window
    out: dict[tuple[str, tuple[str, ...]], Bill] = {}
    for case in CLUSTERS:
        with Warehouse.open(warehouses[case.name], read_only=True) as wh:
            for by in (("team",), ("team", "model"), ("team", "pool", "day")):
                out[(case.name, by)] = compute_bill(wh, window, case.settings, by)
    return out


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """The real S3-compatible server, with the AWS SDK settings a non-AWS server needs."""
    from tools.s3_server import running

    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        with running("gpu-lake") as server:
            yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


ENV = {
    "AWS_ACCESS_KEY_ID": "lake-test", "AWS_SECRET_ACCESS_KEY": "lake-test-secret",
    # The AWS SDKs now send streaming checksums by default (aws-chunked uploads), which
    # S3-compatible servers do not all accept; `when_required` is the documented opt-out.
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
}


def cluster_case(name: str) -> ClusterCase:
    return next(c for c in CLUSTERS if c.name == name)


def copy_lake(lake: Lake, target: Path) -> Lake:
    shutil.copytree(lake.root, target)
    return Lake.open(str(target))

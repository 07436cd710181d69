"""Session fixtures of the field tests: one run per (effects, engine, source, fleet), shared by
every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.field.harness import GPUS, HAMI_GPUS, FieldRun, effects, field_run
from tools.metrics_servers import ServerPool


class FieldRuns:
    """Runs cached per (effects name, engine, source, fleet) for the session."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self._cache: dict[tuple[str, str, str, str], FieldRun] = {}

    def get(self, name: str, engine: str = "prometheus", source: str = "api",
            fleet: str = "default") -> FieldRun:
        key = (name, engine, source, fleet)
        if key not in self._cache:
            root = self.factory.mktemp(f"field-{name}-{engine}-{source}-{fleet}")
            gpus = HAMI_GPUS if fleet == "hami" else GPUS
            self._cache[key] = field_run(name, effects(name), engine, root, source=source,
                                         fleet=fleet, gpus=gpus)
        return self._cache[key]


@pytest.fixture(scope="session")
def field_runs(tmp_path_factory: pytest.TempPathFactory,
               metrics_servers: ServerPool) -> Iterator[FieldRuns]:
    """The session's runs (`metrics_servers` first: it fails clearly without the engines)."""
    yield FieldRuns(tmp_path_factory)


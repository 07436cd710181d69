"""The parts of one running dashboard, in one value the callbacks and routes are given.

Why a module of its own: `dashboards.app` builds these parts and registers the callbacks, and
the callbacks need the parts; with the type living in `app`, the two modules imported each
other. Here it depends on neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import flask
from dash import Dash

from gpuledger.core.config import Settings
from gpuledger.dashboards.access import AccessPolicy
from gpuledger.dashboards.actions import PlanActions
from gpuledger.dashboards.readmodel import ReadModel
from gpuledger.warehouse.snapshot_store import SnapshotStore


class Servable(Protocol):
    """What the request limits, the authentication hook and `start_server` need of an app:
    the warehouse dashboard (`DashboardApp`) and the lake one (`dashboards.lake_app`) alike."""

    policy: AccessPolicy
    settings: Settings

    @property
    def server(self) -> flask.Flask: ...

    def close(self) -> None: ...


@dataclass
class DashboardApp:
    """One dashboard: the Dash app and the parts its callbacks use."""

    dash: Dash
    store: SnapshotStore
    data: ReadModel
    policy: AccessPolicy
    settings: Settings
    actions: PlanActions
    _closed: bool = field(default=False, repr=False)

    @property
    def server(self) -> flask.Flask:
        return self.dash.server

    def close(self) -> None:
        """Stop the snapshot refresher and delete the private snapshots."""
        if not self._closed:
            self._closed = True
            self.actions.wait(timeout_s=5)
            self.store.stop_refreshing()  # no new snapshot, so no new warm-up, from here on
            self.data.close()
            self.store.stop()

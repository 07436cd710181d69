"""`SimulatedFleet`: what the metric renderers read from a simulation, as a Protocol.

Why a Protocol and not `engine.Simulation`: the engine offers `write_openmetrics()` and
`metrics_text()` and so imports the renderers; if the renderers imported the engine back (even
for type hints only) the two modules would form an import cycle, which the import contract
forbids. The renderers depend on this small interface instead; `Simulation` satisfies it
structurally, and the arrow runs one way: engine → openmetrics → simulated_fleet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import polars as pl

    from gpuledger.core.window import Window
    from gpuledger.simulator.fleet import FleetSpec
    from gpuledger.simulator.hardware import Hardware
    from gpuledger.simulator.samples import QueueModel
    from gpuledger.simulator.tenants import Tenants
    from gpuledger.simulator.timebase import Timebase
    from gpuledger.simulator.volcano_queues import VolcanoQueues
    from gpuledger.simulator.workloads import Schedule


class SimulatedFleet(Protocol):
    """The built parts of a simulation (hardware, pods, tenants, queues, timebase) and its
    per-step sample frames; read-only for the renderers."""

    @property
    def spec(self) -> FleetSpec: ...

    @property
    def window(self) -> Window: ...

    @property
    def tb(self) -> Timebase: ...

    @property
    def hw(self) -> Hardware: ...

    @property
    def tenants(self) -> Tenants: ...

    @property
    def schedule(self) -> Schedule: ...

    @property
    def queues(self) -> QueueModel: ...

    @property
    def volcano_queues(self) -> VolcanoQueues: ...

    @property
    def seed(self) -> int: ...

    def step_frames(self, k0: int, k1: int, with_ids: bool = False) -> dict[str, pl.DataFrame]:
        """Sample frames of steps `[k0, k1)`; `with_ids` keeps slot/pod ids for rendering."""
        ...

"""The warehouse's schema history, one frozen file of literal DDL per version.

Why literal text: a step built from the live table list (`core.frames.TABLES`) would change
meaning whenever a column is added there, and files created earlier would never get the column.
A released step is therefore never edited (tests/foundation/test_migrations.py pins each file's
checksum); changing the schema means:
1. change `core.frames` (the declaration the code loads and reads against);
2. add `vNNN_<what>.sql` here with exactly the DDL that turns version N-1 into the new shape
   (`ALTER TABLE ... ADD COLUMN ...`, a new table, an index) and list it in `STEPS`;
3. the migration test then checks that all steps applied to an empty file equal the tables
   `core.frames` declares (plus `warehouse.schema.SUPPORT_DDL`), so a forgotten step fails CI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Step:
    """One schema version: its number, what it does, and the file holding its DDL."""

    version: int
    description: str
    file: str

    def sql(self) -> str:
        """The step's DDL text as shipped (read from the installed package)."""
        return resources.files(__name__).joinpath(self.file).read_text(encoding="utf-8")


STEPS: tuple[Step, ...] = (
    Step(1, "initial schema", "v001_initial.sql"),
    Step(2, "report intents and the gpuledger file marker", "v002_report_intents_and_marker.sql"),
    Step(3, "raw samples without the ts index (zone maps serve time ranges)",
         "v003_samples_without_ts_index.sql"),
    Step(4, "DRA devices, claims, reservations and node planes", "v004_dra_claims.sql"),
    Step(5, "pod priorities and preemptions", "v005_pod_priorities_and_preemptions.sql"),
    Step(6, "vLLM queue gauges on token_samples", "v006_vllm_queue_gauges.sql"),
    Step(7, "DRA pod-claim references from kube-state-metrics", "v007_dra_pod_claims.sql"),
    Step(8, "raw GPU samples as a series dimension and integer-keyed values",
         "v008_gpu_series_and_sample_values.sql"),
    Step(9, "unread sample values at a coarser step (1 % ratios, 0.1 W)",
         "v009_coarse_unread_sample_values.sql"),
    Step(10, "the roll-up's rules: fingerprint columns, rolled-up hours, rule sets",
         "v010_rollup_rules.sql"),
    Step(11, "HAMi vGPU allocations (pod to card, per source)", "v011_vgpu_allocations.sql"),
    Step(12, "DRA devices and claims name their source (the API or Prometheus history)",
         "v012_dra_sources.sql"),
    Step(13, "workloads seen waiting with their status as written; ClusterQueue usage",
         "v013_pending_workloads.sql"),
    Step(14, "node configuration with its validity interval (node_history; nodes.valid_from)",
         "v014_node_history.sql"),
    Step(15, "namespace team labels with their validity interval (namespace_history)",
         "v015_namespace_history.sql"),
    Step(16, "the daily roll-up card_hours_daily, filled from the hourly one", "v016_card_hours_daily.sql"),
    Step(17, "a plan's effect measured on the scheduling twin (plans.twin_effect)",
         "v017_plan_twin_effect.sql"),
    Step(18, "the GPU and token samples' fingerprints per UTC day, kept by every write",
         "v018_sample_fingerprints.sql"),
    Step(19, "the day fingerprints of the roll-ups, allocations and queue samples, kept by every write",
         "v019_rollup_fingerprints.sql"),
)
"""Every version in order, oldest first; append only."""

FILE_NAME = re.compile(r"v(\d{3})_[a-z0-9_]+\.sql")
"""How a step's file is named: its version in three digits, then what it does."""


def step_files() -> list[str]:
    """The `.sql` files shipped in this folder (a test checks each is listed in `STEPS`)."""
    folder = resources.files(__name__)
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))

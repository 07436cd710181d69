"""The fleet spec validates once, with one clear line per mistake.

Cases: the default fleet scales to the asked size with every pool, model and sharing mode;
sizes that are not whole nodes are refused; the shipped example validates; a bad key, a bad
value, bad YAML, a missing file, a MIG config the placement rules cannot place, and an
over-full vGPU split each raise InputError naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.core.errors import InputError
from gpuledger.simulator.fleet import FleetSpec

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("gpus", [40, 256, 1000])
def test_default_fleet_has_every_pool(gpus):
    spec = FleetSpec.default(gpus=gpus)
    assert spec.gpu_count == gpus
    assert {p.sharing for p in spec.pools} == {"exclusive", "mig", "timeslice", "vgpu"}
    assert {p.model for p in spec.pools} == {"H100-80GB", "A100-80GB", "A100-SXM4-40GB", "H200-141GB"}
    assert len(spec.teams) >= 10
    assert spec.unlabeled_namespaces


def test_default_fleet_refuses_partial_nodes():
    with pytest.raises(InputError, match="multiple of 8"):
        FleetSpec.default(gpus=12)


def test_example_file_validates():
    spec = FleetSpec.load(REPO / "examples" / "fleet.example.yaml")
    assert spec.gpu_count == 72
    assert any(p.sharing == "mig" for p in spec.pools)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


POOL = "pools:\n  - name: p\n    model: A100-80GB\n    nodes: 1\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (POOL + "    sharing: shared\n", "pools.0.sharing"),
        (POOL + "    colour: red\n", "pools.0.colour"),
        ("pools:\n  - name: p\n    model: V100\n    nodes: 1\n", "pools.0.model"),
        (POOL + "    sharing: mig\n    mig_configs: {bad: {4g.40gb: 2}}\n", "mig_configs.bad"),
        (POOL + "    sharing: mig\n    mig_configs: {bad: {5g.50gb: 1}}\n", "5g.50gb"),
        (POOL + "    sharing: vgpu\n    vgpu_splits: [[0.7, 0.5]]\n", "pools.0.vgpu_splits"),
        ("pools:\n  - name: p\n    model: A100-80GB\n    nodes: 0\n", "pools.0.nodes"),
        ("pools: [\n", "line"),
        ("- just a list\n", "mapping"),
    ],
)
def test_bad_file_names_file_and_key(tmp_path, text, needle):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        FleetSpec.load(path)
    message = str(info.value)
    assert str(path) in message and needle in message
    assert "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        FleetSpec.load(tmp_path / "nope.yaml")

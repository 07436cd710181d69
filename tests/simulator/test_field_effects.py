"""Field mode: each effect shows in the output, the truth moves only when reality does.

Cases: the API (all off by default, `only` sets one effect at its `all()` level, unknown names
refused, the YAML `field:` section); jitter puts dcgm timestamps off the minute grid within
±10 s, the same offset for every series of a node at a scrape; clock skew is a fixed offset per
node within ±3 s; missed scrapes drop about 2 % of dcgm samples; per-series gaps remove one
field for 2-3 minutes while the series' other fields are present; a util-only node has
GPU_UTIL but no GR_ENGINE_ACTIVE; an exporter restart leaves a hole longer than 5 minutes in
every series of one node; HA replicas write every sample twice, `replica="a"` and `"b"`;
label renames switch `Hostname`→`hostname` and `pod`→`exported_pod` at the window's middle;
bad samples include NaN and -1; the same seed writes the same bytes; telemetry-only effects
that leave activity readings alone leave the ground truth identical, those that drop readings
move only its idle card-hours; with missed scrapes only, each whole card or MIG instance whose
missed minutes all sit inside one holder's span has the truth's idle equal to the documented
rule applied by hand to the GR_ENGINE_ACTIVE values in the written file (a missed minute shows
the last reading; runs of >= 30 minutes under 0.05), and for one at least that differs from the
generator's own idle; node churn, card replacement and pod restarts change it by
the amounts the effect implies (computed here from the effect's definition); promtool
backfills the file with every effect on.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.core.errors import InputError
from gpuledger.core.window import Window
from gpuledger.simulator.engine import Simulation
from gpuledger.simulator.field import READING_EFFECTS, TRUTH_EFFECTS, FieldEffects
from gpuledger.simulator.fleet import FleetSpec
from tests.simulator.conftest import START

WINDOW = Window(START + timedelta(hours=10), START + timedelta(hours=12))
LINE = re.compile(r"^(\w+)\{(.*)\} (\S+) (\S+)$")


def _sim(spec: FleetSpec, effects: FieldEffects, seed: int = 7) -> Simulation:
    return Simulation(spec.model_copy(update={"field": effects}), WINDOW, seed=seed)


def _samples(sim: Simulation, tmp: Path, name: str, metric: str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
    path = tmp / f"{name}.om"
    sim.write_openmetrics(path, chunk=timedelta(minutes=45))
    out = []
    for line in path.read_text().splitlines():
        m = LINE.match(line)
        if m and m.group(1) == metric:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.append((labels, m.group(4), m.group(3)))  # labels, timestamp, value
    return out


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("field")


def test_api_defaults_only_and_names(tiny_spec):
    assert FieldEffects() == FieldEffects.none() and not FieldEffects().any
    everything = FieldEffects.all()
    for name in FieldEffects.names():
        one = FieldEffects.only(name)
        assert getattr(one, name) == getattr(everything, name) != getattr(FieldEffects(), name)
        assert [n for n in FieldEffects.names() if getattr(one, n) != getattr(FieldEffects(), n)] == [name]
        assert one.changes_truth == (name in TRUTH_EFFECTS)
    with pytest.raises(InputError, match="field effect 'nope'"):
        FieldEffects.only("nope")
    data = tiny_spec.model_dump()
    data["field"] = {"jitter_s": 5, "ha_replicas": True}
    assert FleetSpec.parse(data).field == FieldEffects(jitter_s=5.0, ha_replicas=True)
    data["field"] = {"missed_scrapes": 0.9}
    with pytest.raises(InputError, match="field"):
        FleetSpec.parse(data)


def test_jitter_off_grid_within_bound_same_per_node_scrape(tiny_spec, tmp):
    rows = _samples(_sim(tiny_spec, FieldEffects.only("jitter_s")), tmp, "jitter")
    offsets = [float(ts) - round(float(ts) / 60) * 60 for _, ts, _ in rows]
    assert max(abs(o) for o in offsets) <= 10.0 and sum(abs(o) > 0.5 for o in offsets) > len(rows) / 2
    per_scrape = defaultdict(set)
    for (labels, ts, _), _off in zip(rows, offsets, strict=True):
        per_scrape[(labels["Hostname"], round(float(ts) / 60))].add(ts)
    assert all(len(v) == 1 for v in per_scrape.values())


def test_clock_skew_is_a_fixed_offset_per_node(tiny_spec, tmp):
    rows = _samples(_sim(tiny_spec, FieldEffects.only("clock_skew_s")), tmp, "skew")
    per_node = defaultdict(set)
    for labels, ts, _ in rows:
        per_node[labels["Hostname"]].add(round(float(ts) - round(float(ts) / 60) * 60, 3))
    assert all(len(v) == 1 and abs(next(iter(v))) <= 3.0 for v in per_node.values())
    assert len({next(iter(v)) for v in per_node.values()}) > 1


def test_missed_scrapes_drop_about_two_percent(tiny_spec, tmp):
    clean = _samples(_sim(tiny_spec, FieldEffects()), tmp, "clean")
    missed = _samples(_sim(tiny_spec, FieldEffects.only("missed_scrapes")), tmp, "missed")
    assert 0.005 < 1 - len(missed) / len(clean) < 0.04


def test_series_gaps_remove_one_field_for_two_or_three_minutes(tiny_spec, tmp):
    sim = _sim(tiny_spec, FieldEffects(series_gaps=0.5))
    act = {(lab["UUID"], lab.get("GPU_I_ID"), lab.get("vgpu"), ts) for lab, ts, _ in _samples(sim, tmp, "gaps")}
    mem = {(lab["UUID"], lab.get("GPU_I_ID"), lab.get("vgpu"), ts)
           for lab, ts, _ in _samples(sim, tmp, "gaps", "DCGM_FI_DEV_FB_USED")}
    only_mem = sorted(mem - act)
    assert only_mem, "some minutes have memory but no activity reading"
    runs: dict[tuple, list[int]] = defaultdict(list)
    for *key, ts in only_mem:
        runs[tuple(key)].append(int(float(ts)) // 60)
    lengths = []
    for minutes in runs.values():
        start = minutes[0]
        for a, b in zip(minutes, [*minutes[1:], None], strict=True):
            if b != a + 1:
                lengths.append(a - start + 1)
                start = b
    assert set(lengths) <= {2, 3, 4, 5, 6}  # two gaps of one hour may touch across the hour
    assert {2, 3} & set(lengths)


def test_util_only_node_lacks_gr_engine_active(tiny_spec, tmp):
    sim = _sim(tiny_spec, FieldEffects.only("util_only_nodes"))
    act_nodes = {lab["Hostname"] for lab, _, _ in _samples(sim, tmp, "old", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")}
    util_nodes = {lab["Hostname"] for lab, _, _ in _samples(sim, tmp, "old", "DCGM_FI_DEV_GPU_UTIL")}
    all_nodes = {n.name for n in sim.hw.nodes}
    assert util_nodes - act_nodes == {sim.hw.nodes[0].name} and act_nodes == all_nodes - {sim.hw.nodes[0].name}


def test_exporter_restart_leaves_a_hole_in_every_series_of_a_node(tiny_spec, tmp):
    sim = _sim(tiny_spec, replace(FieldEffects(), exporter_restarts=1))
    per_device: dict[tuple, set[int]] = defaultdict(set)  # a device's scrapes, whoever held it
    for lab, ts, _ in _samples(sim, tmp, "restart", "DCGM_FI_DEV_POWER_USAGE"):
        per_device[(lab["Hostname"], lab["UUID"], lab.get("GPU_I_ID"))].add(int(float(ts)))
    per_series = {key: sorted(ts) for key, ts in per_device.items()}
    holed = {key[0] for key, ts in per_series.items() if any(b - a > 300 for a, b in pairwise(ts))}
    assert len(holed) == 1
    node = holed.pop()
    gaps = {max(b - a for a, b in pairwise(ts)) for key, ts in per_series.items() if key[0] == node and len(ts) > 60}
    assert all(g >= 360 for g in gaps)


def test_ha_replicas_double_every_series(tiny_spec, tmp):
    clean = _samples(_sim(tiny_spec, FieldEffects()), tmp, "clean2", "kube_pod_info")
    ha = _samples(_sim(tiny_spec, FieldEffects.only("ha_replicas")), tmp, "ha", "kube_pod_info")
    assert len(ha) == 2 * len(clean)
    by_replica = defaultdict(list)
    for lab, ts, value in ha:
        by_replica[lab.pop("replica")].append((tuple(sorted(lab.items())), ts, value))
    expected = sorted((tuple(sorted(lab.items())), ts, v) for lab, ts, v in clean)
    assert sorted(by_replica["a"]) == expected == sorted(by_replica["b"])


def test_label_renames_switch_at_the_middle(tiny_spec, tmp):
    rows = _samples(_sim(tiny_spec, FieldEffects.only("label_renames")), tmp, "renames")
    middle = (WINDOW.start + (WINDOW.end - WINDOW.start) / 2).timestamp()
    before = [lab for lab, ts, _ in rows if float(ts) < middle]
    after = [lab for lab, ts, _ in rows if float(ts) >= middle]
    assert before and after
    assert all("Hostname" in lab and "hostname" not in lab and "exported_pod" not in lab for lab in before)
    assert all("hostname" in lab and "Hostname" not in lab and "exported_pod" in lab for lab in after)
    assert {lab["pod"] for lab in after if lab["exported_pod"]} <= {
        lab["pod"] for lab in after if lab["pod"].startswith("nvidia-dcgm-exporter-")}


def test_bad_samples_are_nan_or_negative(tiny_spec, tmp):
    rows = _samples(_sim(tiny_spec, FieldEffects(bad_samples=0.05)), tmp, "bad")
    values = [v for _, _, v in rows]
    assert values.count("NaN") > 0 and values.count("-1.0") > 0
    assert 0.01 < (values.count("NaN") + values.count("-1.0")) / len(values) < 0.1


def test_same_seed_same_bytes_other_seed_differs(tiny_spec, tmp):
    paths = []
    for i, (seed, chunk) in enumerate(((7, 45), (7, 45), (7, 20), (8, 45))):
        path = tmp / f"det{i}.om"
        _sim(tiny_spec, FieldEffects.all(), seed=seed).write_openmetrics(
            path, chunk=timedelta(minutes=chunk), families=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",))
        paths.append(path.read_bytes())
    assert paths[0] == paths[1] != paths[3]
    # Another chunking orders lines differently within a family, never changes a sample.
    assert sorted(paths[0].splitlines()) == sorted(paths[2].splitlines())


def test_telemetry_only_effects_leave_truth_identical(tiny_spec):
    clean = _sim(tiny_spec, FieldEffects())
    damaged = FieldEffects.all()
    damaged = replace(damaged, **{n: getattr(FieldEffects(), n) for n in TRUTH_EFFECTS})
    assert damaged.any and not damaged.changes_truth and damaged.drops_readings
    # Effects that leave every activity reading alone: the truth is identical.
    intact = replace(damaged, **{n: getattr(FieldEffects(), n) for n in READING_EFFECTS})
    assert intact.any and not intact.drops_readings
    assert_frame_equal(_sim(tiny_spec, intact).ground_truth(), clean.ground_truth())
    assert_frame_equal(_sim(tiny_spec, intact).truth_by_team(), clean.truth_by_team())
    # Effects that drop readings move idle only: what was held is what was held.
    moved = _sim(tiny_spec, damaged).ground_truth()
    assert_frame_equal(moved.drop("idle_card_hours"), clean.ground_truth().drop("idle_card_hours"))


def test_truth_effects_change_truth_by_their_definition(tiny_spec):
    clean = _sim(tiny_spec, FieldEffects()).ground_truth()
    hours = (WINDOW.end - WINDOW.start).total_seconds() / 3600
    assert clean["card_hours"].sum() == pytest.approx(14 * hours)
    # Two churning nodes of two cards: one absent the first quarter, one the last quarter.
    churn = _sim(tiny_spec, FieldEffects(node_churn=2)).ground_truth()
    assert churn["card_hours"].sum() == pytest.approx(14 * hours - 2 * 2 * hours / 4)
    # One replaced card: ten minutes without a card, then a new UUID in the same place.
    swap_sim = _sim(tiny_spec, FieldEffects(card_replacements=1))
    swap = swap_sim.ground_truth()
    assert swap["card_hours"].sum() == pytest.approx(14 * hours - 10 / 60)
    new_uuid = set(swap["uuid"]) - set(clean["uuid"])
    assert len(new_uuid) == 1
    (gpu,) = [g for g in swap_sim.hw.gpus if g.uuid in new_uuid]
    old = next(g for g in swap_sim.hw.gpus if (g.node, g.index) == (gpu.node, gpu.index) and g.uuid != gpu.uuid)
    first_new = swap.filter(pl.col("uuid") == gpu.uuid)["ts"].min()
    assert swap.filter(pl.col("uuid") == old.uuid)["ts"].max() < first_new
    # Two restarted pods: two more pod names or uids, the card free two minutes each time.
    restart_sim = _sim(tiny_spec, FieldEffects(pod_restarts=2))
    assert len(restart_sim.schedule.pods) == len(_sim(tiny_spec, FieldEffects()).schedule.pods) + 2
    restarted = restart_sim.ground_truth()
    held = restarted.filter(pl.col("allocation_state") == "allocated")["card_hours"].sum()
    clean_held = clean.filter(pl.col("allocation_state") == "allocated")["card_hours"].sum()
    assert held < clean_held and restarted["card_hours"].sum() == pytest.approx(14 * hours)


HAND_WINDOW = Window(START, START + timedelta(hours=12))


def _gr_by_minute(
    sim: Simulation, tmp: Path, name: str
) -> dict[tuple[str, int], dict[int, tuple[str, float]]]:
    """Per whole card or MIG instance (UUID, GPU_I_ID or -1), the (pod or "",
    GR_ENGINE_ACTIVE) written per minute (shared cards' series show the card, left out)."""
    out: dict[tuple[str, int], dict[int, tuple[str, float]]] = defaultdict(dict)
    origin = int(sim.window.start.timestamp())
    shared = {g.uuid for g in sim.hw.gpus if g.sharing in ("timeslice", "vgpu")}
    for labels, ts, value in _samples(sim, tmp, name):
        if labels["UUID"] not in shared:
            device = (labels["UUID"], int(labels.get("GPU_I_ID", -1)))
            out[device][(int(ts) - origin) // 60] = (labels.get("pod", ""), float(value))
    return out


def _hand_idle_minutes(series: dict[int, tuple[str, float]], minutes: int) -> int | None:
    """The documented rule by hand on one card's written minutes, or None when a missed minute
    sits where the holder is unknowable (window edge, or between two holders).

    A missed minute shows the last reading before it (same pod on both sides); idle minutes
    are those in runs of >= 30 minutes of one pod under 0.05; a free minute is never idle."""
    if {0, minutes - 1} - set(series):
        return None
    rows: list[tuple[str, float]] = []
    for m in range(minutes):
        if m in series:
            rows.append(series[m])
            continue
        after = next(series[n] for n in range(m + 1, minutes) if n in series)
        if after[0] != rows[-1][0]:
            return None
        rows.append(rows[-1])
    idle, length, pod = 0, 0, None
    for holder, value in [*rows, ("", 1.0)]:
        if holder and value < 0.05 and (holder == pod or length == 0):
            length, pod = length + 1, holder
            continue
        idle += length if length >= 30 else 0
        length, pod = (1, holder) if holder and value < 0.05 else (0, None)
    return idle


def test_missed_scrapes_idle_truth_follows_the_readings(tiny_spec, tmp):
    spec = tiny_spec.model_copy(update={"field": FieldEffects.only("missed_scrapes")})
    sim = Simulation(spec, HAND_WINDOW, seed=7)
    truth = sim.ground_truth()
    clean = Simulation(tiny_spec, HAND_WINDOW, seed=7).ground_truth()
    minutes = int((HAND_WINDOW.end - HAND_WINDOW.start).total_seconds() // 60)
    checked, differs = 0, 0
    for (uuid, gi), series in sorted(_gr_by_minute(sim, tmp, "missed-hand").items()):
        expected = _hand_idle_minutes(series, minutes)
        if expected is None:
            continue
        assert len(series) < minutes  # the card did miss scrapes
        device = (pl.col("uuid") == uuid) & (pl.col("gpu_i_id") == gi)
        rows = truth.filter(device & (pl.col("allocation_state") == "allocated"))
        share = rows["share"].max()
        assert rows["idle_card_hours"].sum() == pytest.approx(expected / 60 * share, abs=1e-9), uuid
        before = clean.filter(device)["idle_card_hours"].sum()
        differs += before != pytest.approx(expected / 60 * share, abs=1e-9)
        checked += 1
    assert checked >= 2 and differs >= 1, (checked, differs)


@pytest.mark.prometheus
def test_promtool_backfills_every_effect(tiny_spec, tmp):
    path = tmp / "all.om"
    counts = _sim(tiny_spec, FieldEffects.all()).write_openmetrics(path, chunk=timedelta(minutes=45))
    db = tmp / "tsdb"
    out = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path), str(db)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    stored = sum(int(line.split()[4]) for line in out.stdout.splitlines() if re.match(r"^[0-9A-Z]{26}\s", line))
    assert stored == sum(counts.values())

"""`gpuledger optimize quota --queue-system volcano` on a what-if file of Volcano Queues.

Two flat Queues (both under the implicit root) share 12 GPUs; a week of hourly demand puts 2
on a and 10 on b. The command (a real subprocess) plans them with the neutral planner: the
JSON plan observes kind `Queue`, keeps the 12 GPUs, moves deserved quota from a to b, and
carries each changed Queue's rewritten quota maps with cpu untouched. A misspelt Queue field
is refused with one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
QUEUES = {"queues": [
    {"metadata": {"name": "a"}, "spec": {"deserved": {"nvidia.com/gpu": 8, "cpu": 32},
                                         "capability": {"nvidia.com/gpu": 12}, "guarantee": {"resource": {"nvidia.com/gpu": 1}}}},
    {"metadata": {"name": "b"}, "spec": {"deserved": {"nvidia.com/gpu": 4}, "weight": 2}},
]}


def _run(tmp_path: Path, queues: dict) -> subprocess.CompletedProcess[str]:
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(queues))
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = ["ts,cluster_queue,flavor,resource,demand"] + [
        f"{(start + timedelta(hours=h)).isoformat()},{q},default,nvidia.com/gpu,{d}"
        for h in range(24 * 7) for q, d in (("a", 2), ("b", 10))]
    (tmp_path / "h.csv").write_text("\n".join(rows) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "gpuledger", "optimize", "quota", "--queue-system", "volcano",
         "--queues", str(tmp_path / "q.yaml"), "--history", str(tmp_path / "h.csv"), "--no-save",
         "--time-limit", "60", "-o", "json"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_optimize_quota_plans_volcano_queues(tmp_path):
    result = _run(tmp_path, QUEUES)
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert {o["kind"] for o in plan["observed"]} == {"Queue"}
    changes = {c["cluster_queue"]: c for c in plan["changes"]["quotas"]}
    assert changes["a"]["new_nominal"] < 8 and changes["b"]["new_nominal"] > 4
    assert changes["a"]["new_nominal"] + changes["b"]["new_nominal"] == 12
    bodies = {u["name"]: u["resource_groups"][0] for u in plan["changes"]["cluster_queues"]}
    assert bodies["a"]["deserved"]["cpu"] == 32
    assert bodies["a"]["deserved"]["nvidia.com/gpu"] == changes["a"]["new_nominal"]


def test_a_misspelt_queue_field_is_one_line(tmp_path):
    bad = {"queues": [{"metadata": {"name": "a"}, "spec": {"deservd": {"nvidia.com/gpu": 8}}}]}
    result = _run(tmp_path, bad)
    assert result.returncode != 0
    assert "deservd" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

"""The measuring side of `bench.bench_api_load`, run by path with PYTHONPATH at the tree measured.

It imports only what main and this branch both have (`gpuledger.*`, `tests.dashboards.conftest`),
so one file measures both trees in the same run. argv: warehouse, cache folder, rounds,
threads, result file, period. The app is served over real HTTP (`dashboards.app.start_server`), warmed as
after every new snapshot (`ReadModel.wait_warm`), then the mixed load: every round issues the
whole mix once, `threads` clients in parallel, each request timed end to end.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

from gpuledger.dashboards.app import create_app, start_server
from tests.dashboards.conftest import LEAD_TEAM, admin_headers, lead_headers, settings_with_roles

ADMIN, LEAD = admin_headers(), lead_headers()
PERIOD = sys.argv[6] if len(sys.argv) > 6 else "2026-11"
MIX: list[tuple[str, str, dict[str, str]]] = [
    ("bill", f"/api/v1/bill?period={PERIOD}", ADMIN),
    ("bill_by_model", f"/api/v1/bill?period={PERIOD}&by=team,model", ADMIN),
    ("bill_lead", f"/api/v1/bill?period={PERIOD}", LEAD),
    ("idle_owner", f"/api/v1/idle?period={PERIOD}", ADMIN),
    ("idle_pod", f"/api/v1/idle?period={PERIOD}&by=pod&top=50", ADMIN),
    ("idle_lead", f"/api/v1/idle?period={PERIOD}&team={LEAD_TEAM}", LEAD),
    ("idle_namespace", f"/api/v1/idle?period={PERIOD}&namespace={LEAD_TEAM}", ADMIN),
    ("recommendations", f"/api/v1/recommendations?period={PERIOD}", ADMIN),
    ("plans", "/api/v1/plans", ADMIN),
]


def get(url: str, headers: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as answer:
        answer.read()
        status = answer.status
    return time.perf_counter() - started, status


def main() -> None:
    path, cache, rounds, threads, out = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), Path(sys.argv[5])
    app = create_app(settings_with_roles(), path, background=False, cache_dir=cache)
    server = start_server(app)
    try:
        started = time.perf_counter()
        app.store.refresh()
        app.data.wait_warm()
        warm_s = time.perf_counter() - started
        first = {name: round(get(server.url + url, h)[0] * 1000, 1) for name, url, h in MIX}
        todo = [(name, url, h) for _ in range(rounds) for name, url, h in MIX]
        lock = threading.Lock()
        samples: list[tuple[str, float, int]] = []

        def client() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    name, url, h = todo.pop()
                seconds, status = get(server.url + url, h)
                with lock:
                    samples.append((name, seconds, status))

        wall = time.perf_counter()
        workers = [threading.Thread(target=client) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.perf_counter() - wall
    finally:
        server.stop()
        app.close()
    out.write_text(json.dumps({"warm_s": round(warm_s, 2), "first_ms": first, "wall_s": round(wall, 2),
                               "samples": samples}))


if __name__ == "__main__":
    main()

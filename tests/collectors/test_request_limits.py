"""Whole-request deadline and answer-size cap (issue 31 item 9), against a real local server.

- a server trickling 64 bytes every 0.5 s: `timeout_s` (per read) never trips, so before the
  deadline the run hung with no message; now one line naming the query and
  `prometheus.deadline_s`, within the deadline plus one read;
- a server trickling its headers (a status line, then one header line that never ends): the
  body reader never starts, so the deadline must cover the wait for the headers; and a
  request past its deadline is not sent again, whatever `retries` says;
- a 300 MB answer: read by a child process whose peak RSS is measured; the cap refuses it
  while streaming (one line naming the query and `prometheus.max_response_mb`) and the peak
  stays within the cap plus the interpreter, where buffering it would add 300 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuledger.collectors.prom_http import PromHttp
from gpuledger.core.config import PrometheusSettings
from gpuledger.core.errors import SourceError
from tests.collectors.hostile import Fault, HostileProxy

AT = datetime(2026, 1, 1, tzinfo=UTC)
QUERY = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


@pytest.fixture
def proxy() -> Iterator[HostileProxy]:
    server = HostileProxy("http://127.0.0.1:9")  # nothing forwarded: every read is faulted
    yield server
    server.close()


def test_trickling_server_meets_the_whole_request_deadline(proxy: HostileProxy) -> None:
    proxy.fault = Fault("trickle")
    http = PromHttp(proxy.url, PrometheusSettings(timeout_s=10, deadline_s=2, retries=0))
    started = time.monotonic()
    with pytest.raises(SourceError) as failure:
        http.query_range(QUERY, AT, AT, 60)
    elapsed = time.monotonic() - started
    message = str(failure.value)
    assert elapsed < 2 + 0.5 + 1.5, elapsed  # the deadline, one trickle interval, slack
    assert "prometheus.deadline_s = 2s" in message and QUERY in message and "\n" not in message


@pytest.mark.parametrize("retries", [0, 3])
def test_trickled_headers_meet_the_whole_request_deadline(proxy: HostileProxy, retries: int) -> None:
    proxy.fault = Fault("trickle_headers")
    http = PromHttp(proxy.url, PrometheusSettings(timeout_s=10, deadline_s=2, retries=retries),
                    backoff_s=1)
    started = time.monotonic()
    with pytest.raises(SourceError) as failure:
        http.query_range(QUERY, AT, AT, 60)
    elapsed = time.monotonic() - started
    message = str(failure.value)
    assert elapsed < 2 + 1.5, elapsed  # the deadline and slack: no retry after it
    assert "prometheus.deadline_s = 2s" in message and QUERY in message and "\n" not in message
    assert "headers" in message
    assert proxy.faulted == 1  # sent once: a request past its deadline is not retried


def test_a_request_inside_its_deadline_is_answered_and_leaves_no_deadline_behind(
        proxy: HostileProxy) -> None:
    proxy.fault = Fault("empty")
    # 3 s: room for a loaded 2-core CI machine to answer each request
    http = PromHttp(proxy.url, PrometheusSettings(timeout_s=10, deadline_s=3, retries=0))
    for _ in range(3):  # the connection is reused after the deadline's timer has been cancelled
        assert json.loads(http.query_range(QUERY, AT, AT, 60))["data"]["result"] == []
    time.sleep(3.2)  # past the first request's deadline: a cancelled timer never cuts a later one
    assert json.loads(http.query_range(QUERY, AT, AT, 60))["data"]["result"] == []


CHILD = textwrap.dedent("""
    import json, resource, sys
    from datetime import UTC, datetime
    from gpuledger.collectors.prom_http import PromHttp
    from gpuledger.core.config import PrometheusSettings
    from gpuledger.core.errors import SourceError
    url, cap = sys.argv[1], float(sys.argv[2])
    http = PromHttp(url, PrometheusSettings(timeout_s=30, retries=0, max_response_mb=cap))
    at = datetime(2026, 1, 1, tzinfo=UTC)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        body = http.query_range("DCGM_FI_PROF_GR_ENGINE_ACTIVE", at, at, 60)
        error = None
    except SourceError as exc:
        error = str(exc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kb": before, "after_kb": after, "error": error}))
""")


def test_huge_answer_refused_while_streaming(proxy: HostileProxy, tmp_path: Path) -> None:
    size = 300_000_000
    proxy.fault = Fault("huge", size=size)
    cap_mb = 32
    done = subprocess.run([sys.executable, "-c", CHILD, proxy.url, str(cap_mb)], capture_output=True,
                          text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["error"] is not None and "prometheus.max_response_mb = 32 MB" in result["error"]
    assert QUERY in result["error"]
    grown_mb = (result["after_kb"] - result["before_kb"]) / 1024
    # Buffering would grow by the 300 MB answer; the cap allows its 32 MB (held as pieces,
    # then joined: twice) plus the socket's read size.
    assert grown_mb < 2 * cap_mb + 16, grown_mb

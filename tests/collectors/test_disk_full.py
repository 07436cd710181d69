"""A full disk while `collect` commits a chunk (issue 31 item 10): one line, exit 74 (`EX_IOERR`),
the path named, no traceback; before, DuckDB's `TransactionException` ("Failed to commit: Could
not write file ...wal: No space left on device") ended as exit 70, "unexpected ...".

The disk is real: a 20 MB tmpfs, filled (but for a few KB) after a first collect, so the next
run's first commit meets ENOSPC writing the WAL. Mounting needs root (CI runs as root).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.cli import EXIT_OS, main
from tests.collectors import tinyfleet
from tools.metrics_servers import ServerPool

pytestmark = pytest.mark.prometheus


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _collect(url: str, warehouse: Path, hours: int) -> int:
    end = tinyfleet.T0 + timedelta(hours=hours)
    return main(["--warehouse", str(warehouse), "collect", "-q", "--prometheus", url,
                 "--start", tinyfleet.T0.isoformat(), "--end", end.isoformat()])


@pytest.mark.parametrize("left_kb", [0, 64])
def test_disk_full_at_a_collect_commit_is_exit_74(metrics_servers: ServerPool, tiny_openmetrics: Path,
                                                   small_disk: Path, left_kb: int,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = metrics_servers.prometheus(tiny_openmetrics).url
    warehouse = small_disk / "w.duckdb"
    assert _collect(url, warehouse, 1) == 0
    stat = os.statvfs(small_disk)
    with open(small_disk / "filler", "wb") as filler:
        filler.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - left_kb * 1024))
    capsys.readouterr()
    assert _collect(url, warehouse, 3) == EXIT_OS
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("gpuledger: error: ") and "No space left on device" in lines[0]
    assert str(small_disk) in lines[0]

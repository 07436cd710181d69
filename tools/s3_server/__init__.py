"""A real S3-compatible server for the lake tests, built from Go modules and cached.

`build()` compiles `main.go` (the Apache-2.0 gofakes3 router over its in-memory backend) with
the Go module proxy, once, into `~/.cache/gpuledger/s3/` (`$GPULEDGER_S3_CACHE` overrides):
the binary's name carries a digest of go.mod, go.sum and main.go, so an edit rebuilds and an
unchanged tree finds it in well under a second. `S3Server` starts it on a free port and stops
it. `.ci/run` calls `python3 -m tools.s3_server build` before pytest.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = ("go.mod", "go.sum", "main.go")
CACHE_ENV = "GPULEDGER_S3_CACHE"


def cache_root() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuledger" / "s3"


def binary_path() -> Path:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((HERE / name).read_bytes())
    return cache_root() / f"s3-server-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class BuildResult:
    binary: Path
    cached: bool
    seconds: float


def build(force: bool = False) -> BuildResult:
    """Compile the server unless a binary of these exact sources is cached."""
    started = time.monotonic()
    target = binary_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists() and not force:
            return BuildResult(target, True, time.monotonic() - started)
        go = shutil.which("go")
        if go is None:
            raise RuntimeError("s3 server: the `go` command is needed to build it (Go 1.24+)")
        temp = target.with_name(target.name + ".tmp")
        env = {**os.environ, "CGO_ENABLED": "0"}
        done = subprocess.run(
            [go, "build", "-trimpath", "-o", str(temp), "."], cwd=HERE, env=env,
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"s3 server: go build failed:\n{done.stderr[-4000:]}")
        os.replace(temp, target)
    return BuildResult(target, False, time.monotonic() - started)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    """`http://127.0.0.1:PORT`."""
    bucket: str
    process: subprocess.Popen[str]


@contextlib.contextmanager
def running(bucket: str = "gpu-lake") -> Iterator[S3Server]:
    """Start the server on a free port with `bucket` created; stop it after."""
    binary = build().binary
    proc = subprocess.Popen(
        [str(binary), "-addr", "127.0.0.1:0", "-bucket", bucket],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # printed once the socket accepts connections
        if not line.startswith("listening on "):
            raise RuntimeError(f"s3 server did not start (said {line!r}, exit {proc.poll()})")
        yield S3Server(f"http://{line.removeprefix('listening on ')}", bucket, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

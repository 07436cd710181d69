"""Start and stop server processes so that none outlives its owner.

Why its own module: "no orphans, even when a test fails" needs three independent guards, and
they are easier to trust when they sit together:
1. every server runs in its own process group (`start_new_session`), and stopping signals the
   whole group (SIGTERM, then SIGKILL after a grace period);
2. an `atexit` hook stops whatever is still registered when the interpreter exits normally;
3. for owners that may be killed outright (SIGKILL of pytest), the child asks the kernel for
   `PR_SET_PDEATHSIG=SIGKILL`, so it dies with the thread that started it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_registry: dict[int, subprocess.Popen[bytes]] = {}
_registry_lock = threading.Lock()


def _die_with_parent() -> Callable[[], None]:
    """A preexec function that sets PDEATHSIG; a no-op where prctl is unavailable."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # pragma: no cover - non-glibc platforms
        return lambda: None

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


def spawn(argv: Sequence[str], log_path: Path, *, die_with_parent: bool = True) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session, stdout+stderr appended to `log_path`, and register it.

    `die_with_parent=False` is for the manual CLI (`up`), whose servers must outlive the command;
    `down` stops them through the pid file instead.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            # preexec_fn only calls prctl (async-signal-safe), so the fork-with-threads hazard
            # that PLW1509 warns about does not apply.
            start_new_session=True, preexec_fn=_die_with_parent() if die_with_parent else None,  # noqa: PLW1509
        )
    if die_with_parent:
        with _registry_lock:
            _registry[proc.pid] = proc
    return proc


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, wait up to `grace_s`, then SIGKILL it; always reap."""
    with _registry_lock:
        _registry.pop(proc.pid, None)
    if proc.poll() is None:
        kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace_s)
    # The leader may be gone while a child of its group lingers: sweep the group once more.
    kill_group(proc.pid, signal.SIGKILL)


def kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_pid(pid: int, grace_s: float = 10.0) -> None:
    """Stop a server we did not spawn in this process (the CLI's `down`), by its group id."""
    kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    kill_group(pid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stop_all_registered() -> None:
    with _registry_lock:
        procs = list(_registry.values())
    for proc in procs:
        stop(proc, grace_s=5.0)


atexit.register(_stop_all_registered)

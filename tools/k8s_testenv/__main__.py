"""`python -m tools.k8s_testenv build|up|down|status`: the test environment by hand.

- `build`  compile kube-apiserver and etcd and fetch the Kueue CRDs into the cache (a no-op in
           well under a second when cached); `.ci/run` calls it before pytest.
- `up`     start a cluster that keeps running after the command returns; prints the kubeconfig.
- `down`   stop the cluster `up` started.
- `status` what is cached and what is running.
`--kubernetes/--etcd/--kueue` override the pinned versions (to try another release).
Exit status: 0 on success, 1 with a one-line message on stderr otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KUEUE_VERSION,
    Layout,
    default_cache_root,
)


def _state_dir(layout: Layout) -> Path:
    return layout.dir / "run"


def _state_file(layout: Layout) -> Path:
    return _state_dir(layout) / "state.json"


def _build(args: argparse.Namespace, layout: Layout) -> int:
    from tools.k8s_testenv.builder import build

    result = build(layout, echo=lambda line: print(line, flush=True), force=args.force)
    word = "cached" if result.cached else "built"
    print(f"k8s-testenv: {word} kube-apiserver {layout.kubernetes}, etcd {layout.etcd}, "
          f"Kueue {layout.kueue} CRDs in {layout.dir} ({result.seconds:.1f}s)")
    return 0


def _up(args: argparse.Namespace, layout: Layout) -> int:
    from tools.k8s_testenv.builder import build
    from tools.k8s_testenv.cluster import LocalCluster, save_state
    from tools.k8s_testenv.processes import pid_alive

    state = _state_file(layout)
    if state.is_file() and any(pid_alive(p) for p in json.loads(state.read_text())["pids"]):
        raise K8sTestEnvError(f"k8s-testenv: a cluster is already up (state: {state}); run `down` first")
    build(layout, echo=lambda line: print(line, flush=True))
    cluster = LocalCluster(layout, _state_dir(layout), die_with_parent=False, install_crds=not args.no_crds)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    save_state(cluster, state)
    print(f"k8s-testenv: up in {cluster.start_seconds:.1f}s at {cluster.server}")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def _down(args: argparse.Namespace, layout: Layout) -> int:
    from tools.k8s_testenv.processes import stop_pid

    state = _state_file(layout)
    if not state.is_file():
        print("k8s-testenv: nothing is up")
        return 0
    for pid in json.loads(state.read_text())["pids"][::-1]:  # apiserver first, then etcd
        stop_pid(pid)
    state.unlink()
    print("k8s-testenv: stopped")
    return 0


def _status(args: argparse.Namespace, layout: Layout) -> int:
    from tools.k8s_testenv.builder import is_cached
    from tools.k8s_testenv.processes import pid_alive

    info: dict[str, object] = {"cache": str(layout.dir), "cached": is_cached(layout)}
    if layout.stamp.is_file():
        info["build"] = json.loads(layout.stamp.read_text())
    state = _state_file(layout)
    if state.is_file():
        running = json.loads(state.read_text())
        running["alive"] = [pid_alive(p) for p in running["pids"]]
        info["running"] = running
    print(json.dumps(info, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.k8s_testenv", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="cache root (default: ~/.cache/gpuledger/k8s-testenv)")
    parser.add_argument("--kubernetes", default=KUBERNETES_VERSION, help="k8s.io/kubernetes release to build")
    parser.add_argument("--etcd", default=ETCD_VERSION, help="go.etcd.io/etcd/server/v3 release to build")
    parser.add_argument("--kueue", default=KUEUE_VERSION, help="sigs.k8s.io/kueue release for the CRDs")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile or reuse kube-apiserver, etcd, Kueue CRDs")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    b.set_defaults(func=_build)
    up = sub.add_parser("up", help="start a cluster that outlives this command")
    up.add_argument("--no-crds", action="store_true", help="do not install the Kueue CRDs")
    up.set_defaults(func=_up)
    sub.add_parser("down", help="stop the cluster `up` started").set_defaults(func=_down)
    sub.add_parser("status", help="show the cache and any running cluster").set_defaults(func=_status)
    args = parser.parse_args(argv)
    layout = Layout(args.cache or default_cache_root(), args.kubernetes, args.etcd, args.kueue)
    started = time.monotonic()
    try:
        return int(args.func(args, layout))
    except K8sTestEnvError as exc:
        print(f"error: {exc} ({time.monotonic() - started:.0f}s)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`python -m tools.twin_build build|status`: the scheduling twin's binaries by hand.

- `build [PART ...] [--force]`  compile the parts (all by default) into the cache; a no-op when cached.
- `status`                      which parts are cached, with the wall/CPU seconds their build took.
- `bench [--out FILE]`          time warm rebuilds beside the first build (bench/results/twin_build.json).
Exit status: 0 on success, 1 with a one-line message on stderr otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuledger.core.errors import GpuledgerError
from tools.twin_build.versions import PARTS, Layout, default_cache_root


def _build(args: argparse.Namespace, layout: Layout) -> int:
    from tools.twin_build.builder import build

    for r in build(layout, args.parts or tuple(PARTS), echo=lambda s: print(s, flush=True), force=args.force):
        word = "cached" if r.cached else f"built in {r.wall_s:.0f}s wall, {r.cpu_s:.0f}s CPU"
        print(f"twin-build: {r.name}: {word} ({r.path})", flush=True)
    return 0


def _status(args: argparse.Namespace, layout: Layout) -> int:
    from tools.twin_build.builder import is_cached

    for part in PARTS.values():
        if is_cached(layout, part):
            stamp = json.loads(layout.stamp(part).read_text())
            first = stamp.get("first_build") or stamp
            print(f"{part.name}: cached {stamp['version']} (first build {first['wall_s']}s wall, "
                  f"{first['cpu_s']}s CPU; last {stamp['wall_s']}s wall, {stamp['cpu_s']}s CPU)")
        else:
            print(f"{part.name}: not built")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.twin_build")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the twin's binaries into the cache")
    b.add_argument("parts", nargs="*", metavar="PART", help="any of: " + ", ".join(PARTS))
    b.add_argument("--force", action="store_true", help="run `go build` even when cached (a warm rebuild)")
    sub.add_parser("status", help="what is cached")
    bench = sub.add_parser("bench", help="measure warm rebuilds beside the recorded first builds")
    bench.add_argument("--out", type=Path, default=Path("bench/results/twin_build.json"))
    args = parser.parse_args(argv)
    layout = Layout(default_cache_root())
    try:
        if args.command == "bench":
            from tools.twin_build.bench import run_bench

            run_bench(layout, args.out)
            print(f"twin-build: wrote {args.out}")
            return 0
        return _build(args, layout) if args.command == "build" else _status(args, layout)
    except GpuledgerError as exc:
        print(str(exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

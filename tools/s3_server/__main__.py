"""`python3 -m tools.s3_server build [--force]`: compile (or find cached) the lake's S3 server."""

from __future__ import annotations

import argparse

from tools.s3_server import build


def main() -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.s3_server")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the S3 server into the cache (no-op when cached)")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args()
    result = build(force=args.force)
    word = "cached" if result.cached else "built"
    print(f"s3 server {word}: {result.binary} ({result.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

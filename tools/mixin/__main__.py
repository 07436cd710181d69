"""`python -m tools.mixin [--check]`: write (or only compare) the generated rules and dashboard."""

from __future__ import annotations

import sys

from tools.mixin.files import stale, write


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        out = stale()
        for path in out:
            print(
                f"mixin: {path} is not what tools/mixin writes: run `python -m tools.mixin`", file=sys.stderr
            )
        return 1 if out else 0
    for path in write():
        print(f"mixin: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

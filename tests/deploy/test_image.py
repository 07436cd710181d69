"""deploy/Dockerfile: the recipe a user ships (no registry is reachable here, so it is read,
not built): two stages, the final one without a compiler, with Debian's Pango libraries for the
PDF statements, non-root, `gpuledger` as entrypoint, installing every stage package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    out: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_two_stages_and_a_clean_final_one():
    build, final = stages()
    assert " AS build" in build[0] and " AS runtime" in final[0]
    final_text = "\n".join(final)
    assert "COPY --from=build /opt/gpuledger /opt/gpuledger" in final_text
    for absent in ("build-essential", "gcc", "pip install", "COPY core", "COPY gpuledger"):
        assert absent not in final_text, absent
    for lib in ("libpango-1.0-0", "libpangoft2-1.0-0", "fonts-dejavu-core"):
        assert lib in final_text
    user = [ln for ln in final if ln.startswith("USER ")]
    assert user == ["USER 10001:10001"]
    assert final[-2:] == ['ENTRYPOINT ["gpuledger"]', 'CMD ["--help"]']


def test_every_stage_package_is_copied_into_the_build():
    build = "\n".join(stages()[0])
    links = sorted(p.name for p in (ROOT / "gpuledger").iterdir() if p.is_symlink())
    assert links, "the stage folders are linked into gpuledger/"
    for name in links:
        assert f"COPY {name} {name}" in build, name
    assert "COPY gpuledger gpuledger" in build and "pip install ." in build

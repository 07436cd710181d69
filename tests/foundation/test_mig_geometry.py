"""MIG geometry is generated from the placement rules, and matches NVIDIA's published facts.

Cases: the classic profile set has the 19 maximal layouts of the MIG user guide's figure;
4g and 3g coexist (4g at 0, 3g at 4); the double-memory 1g starts only at even slices; no
layout exceeds 7 compute or 8 memory slices or a profile's maximum; at most one +me
instance; `place` finds a placement for valid counts and refuses impossible ones; model names
from dcgm-exporter and GFD map to canonical models.
"""

from collections import Counter

import pytest

from gpuledger.core.errors import InputError
from gpuledger.core.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    canonical_model,
    catalog,
    gpu_model,
    parse_profile_name,
)

CLASSIC = frozenset({"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})


def test_classic_set_has_nineteen_maximal_layouts():
    layouts = gpu_model("H100-80GB").maximal_layouts(profiles=CLASSIC)
    assert len(layouts) == 19
    # each maximal layout is a distinct physical arrangement
    assert len({tuple((p.profile, p.start) for p in lay) for lay in layouts}) == 19


@pytest.mark.parametrize("model", sorted(catalog()))
def test_every_generated_layout_obeys_the_rules(model):
    gm = catalog()[model]
    for layout in gm.layouts(media_extensions=True):
        used: list[int] = []
        counts = Counter(p.profile for p in layout)
        for p in layout:
            prof = gm.profiles[p.profile]
            assert p.start in prof.starts
            used.extend(range(p.start, p.start + prof.memory))
        assert len(used) == len(set(used)) and max(used) < MEMORY_SLICES
        assert sum(gm.profiles[p.profile].compute for p in layout) <= COMPUTE_SLICES
        assert all(counts[n] <= gm.profiles[n].max_count for n in counts)
        assert sum(1 for p in layout if p.profile.endswith("+me")) <= 1


def test_4g_and_3g_coexist_and_double_memory_1g_starts_even():
    gm = gpu_model("A100-80GB")
    lay = gm.place({"4g.40gb": 1, "3g.40gb": 1})
    assert sorted((p.profile, p.start) for p in lay) == [("3g.40gb", 4), ("4g.40gb", 0)]
    starts = {p.start for lay in gm.layouts() for p in lay if p.profile == "1g.20gb"}
    assert starts == {0, 2, 4, 6}


def test_impossible_layouts_are_refused_with_the_model_named():
    gm = gpu_model("H100-80GB")
    with pytest.raises(InputError, match="cannot be placed on a H100-80GB"):
        gm.place({"4g.40gb": 1, "3g.40gb": 2})
    with pytest.raises(InputError, match="does not exist on H100-80GB"):
        gm.validate({"5g.50gb": 1})
    # 7 x 1g is fine, 8 x 1g is not (only 7 compute slices)
    assert len(gm.place({"1g.10gb": 7})) == 7
    with pytest.raises(InputError):
        gm.place({"1g.10gb": 8})


def test_model_names_map_to_canonical():
    assert canonical_model("NVIDIA H100 80GB HBM3") == "H100-80GB"
    assert canonical_model("NVIDIA A100-SXM4-80GB") == "A100-80GB"
    assert canonical_model("NVIDIA A100-SXM4-40GB") == "A100-SXM4-40GB"
    assert canonical_model("NVIDIA H200") == "H200-141GB"
    assert canonical_model("Tesla T4") == "Tesla T4"
    assert parse_profile_name("nvidia.com/mig-3g.40gb") == (3, 40)
    assert gpu_model("H200-141GB").share("3g.71gb") == pytest.approx(3 / 7)
    assert gpu_model("H200-141GB").share("3g.71gb", basis="memory") == pytest.approx(4 / 8)

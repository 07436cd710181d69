"""Geometry the MIG optimizer relies on, checked against NVIDIA's published facts.

Cases:
- the classic set {1g, 2g, 3g, 4g, 7g} has the 19 maximal physical layouts of the MIG user
  guide's figure, which collapse to 14 distinct profile-count shapes;
- 4g and 3g coexist (4g at slice 0, 3g at slice 4) and {4g, 3g} is a target shape;
- the double-memory 1g profile (1g.20gb on H100) starts only at slices 0, 2, 4, 6, so at most
  four fit on a GPU, while seven 1g.10gb fit;
- target shapes are exactly the count-maximal valid shapes (none contains another);
- the optimizer's placement index (`GpuModel.placement`) agrees with `place` on every shape of
  every model, and refuses impossible shapes with a one-line InputError;
- the add table grows a shape only into valid shapes and agrees with the placement rules.
"""

from __future__ import annotations

import pytest

from gpuledger.core.errors import InputError
from gpuledger.core.mig import catalog, gpu_model, shape_of
from gpuledger.optimizer.mig.geometry import AddTable, stranded_slices, target_shapes, valid_shapes

H100 = "H100-80GB"
CLASSIC = frozenset({"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})


def test_classic_set_nineteen_maximal_layouts_fourteen_shapes():
    layouts = gpu_model(H100).maximal_layouts(profiles=CLASSIC)
    assert len(layouts) == 19
    shapes = {shape_of(lay) for lay in layouts}
    assert len(shapes) == 14
    # the count-maximal ones are a subset: e.g. {1g,2g,3g} is physically maximal in one
    # placement, but {2x1g,2g,3g} holds more with the same profiles
    assert set(target_shapes(H100, CLASSIC)) <= shapes
    assert (("1g.10gb", 1), ("2g.20gb", 1), ("3g.40gb", 1)) in shapes
    assert (("1g.10gb", 1), ("2g.20gb", 1), ("3g.40gb", 1)) not in target_shapes(H100, CLASSIC)


def test_four_g_and_three_g_coexist():
    layout = gpu_model(H100).placement({"4g.40gb": 1, "3g.40gb": 1})
    starts = {p.profile: p.start for p in layout}
    assert starts == {"4g.40gb": 0, "3g.40gb": 4}
    assert (("3g.40gb", 1), ("4g.40gb", 1)) in target_shapes(H100, CLASSIC)
    assert stranded_slices(H100, (("3g.40gb", 1), ("4g.40gb", 1))) == 0


def test_double_memory_one_g_starts_on_even_slices():
    model = gpu_model(H100)
    assert model.profiles["1g.20gb"].starts == (0, 2, 4, 6)
    starts = {p.start for lay in model.layouts() for p in lay if p.profile == "1g.20gb"}
    assert starts == {0, 2, 4, 6}
    assert (("1g.20gb", 4),) in valid_shapes(H100, frozenset({"1g.20gb"}))
    assert (("1g.20gb", 5),) not in valid_shapes(H100, frozenset({"1g.20gb"}))
    assert (("1g.10gb", 7),) in valid_shapes(H100, frozenset({"1g.10gb"}))


@pytest.mark.parametrize("model", sorted(catalog()))
def test_target_shapes_are_count_maximal(model):
    profiles = frozenset(p for p in catalog()[model].profiles if not p.endswith("+me"))
    targets = target_shapes(model, profiles)
    valid = valid_shapes(model, profiles)
    assert set(targets) <= valid
    for t in targets:
        bigger = [v for v in valid if v != t and all(dict(v).get(n, 0) >= c for n, c in t)]
        assert not bigger, (t, bigger[:1])
    # and every valid shape is dominated by (or is) some target shape
    for v in valid:
        assert any(all(dict(t).get(n, 0) >= c for n, c in v) for t in targets)


@pytest.mark.parametrize("model", sorted(catalog()))
def test_placement_index_agrees_with_place(model):
    gm = gpu_model(model)
    for shape in gm.shapes(media_extensions=True):
        assert gm.placement(shape) == gm.place(shape)
    seven_g = next(p for p in gm.profiles if p.startswith("7g"))
    one_g = next(p for p in gm.profiles if p.startswith("1g") and not p.endswith("+me"))
    with pytest.raises(InputError, match="cannot be placed"):
        gm.placement({seven_g: 1, one_g: 1})
    with pytest.raises(InputError, match="does not exist"):
        gm.placement({"9g.99gb": 1})


def test_add_table_follows_the_rules():
    table = AddTable(H100, CLASSIC)
    assert table.add((), "7g.80gb") == (("7g.80gb", 1),)
    assert table.add((("7g.80gb", 1),), "1g.10gb") is None
    assert table.add((("4g.40gb", 1),), "3g.40gb") == (("3g.40gb", 1), ("4g.40gb", 1))
    assert table.add((("4g.40gb", 1),), "4g.40gb") is None
    for (shape, profile), grown in table._next.items():
        gpu_model(H100).placement(grown)  # every grown shape has a valid placement
        assert dict(grown)[profile] == dict(shape).get(profile, 0) + 1

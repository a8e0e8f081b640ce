"""The registry is the single source of truth: every op has a lowering, and the
builder exposes the contract's methods for the op groups implemented so far."""

from __future__ import annotations

import xlamlir as xm
from xlamlir.dialect.irdl import dialect_irdl_text, new_context
from xlamlir.dialect.registry import REGISTRY
from xlamlir.lowering.patterns.framework import LOWERINGS, missing_lowerings

# API.md rows implemented so far (issues: foundation, data movement/reductions/dot).
CONTRACT_METHODS = """
abs neg sign floor ceil round round_nearest_afz round_nearest_even exp expm1 log log1p logistic
sqrt rsqrt cbrt sin cos tan tanh cosh atan erf is_finite not_ clz population_count real imag
add sub mul div rem max min pow atan2 complex and_ or_ xor shift_left shift_right_arithmetic
shift_right_logical eq ne lt le gt ge compare select clamp convert_element_type
bitcast_convert_type reduce_precision broadcast broadcast_in_dim reshape collapse transpose rev
slice concat_in_dim pad iota get_dimension_size dynamic_slice dynamic_update_slice reduce
reduce_window select_and_scatter dot dot_general tuple get_tuple_element parameter constant build
""".split()


def test_every_op_has_a_lowering() -> None:
    import xlamlir.lowering.lower_pass  # noqa: F401  (registers every lowering)

    assert missing_lowerings() == []
    assert set(LOWERINGS) <= set(REGISTRY)


def test_builder_has_the_contract_methods() -> None:
    missing = [m for m in CONTRACT_METHODS if not callable(getattr(xm.XlaBuilder, m, None))]
    assert missing == []


def test_every_op_is_in_the_irdl_dialect() -> None:
    text = dialect_irdl_text()
    for name in REGISTRY:
        assert f"irdl.operation @{name} " in text
    new_context()  # loads without error


def test_total_order_and_logical_not_sugar() -> None:
    import numpy as np

    b = xm.XlaBuilder("sugar")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4,)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (4,)))
    b.tuple([b.lt_total_order(x, y), b.eq_total_order(x, y), b.logical_not(b.lt(x, y))])
    xv = np.array([-0.0, np.nan, 1.0, -np.nan], np.float32)
    yv = np.array([0.0, np.nan, 2.0, 1.0], np.float32)
    lt, eq, not_lt = xm.compile(b.build())(xv, yv)
    assert lt.tolist() == [True, False, True, True]  # -0 < +0, -NaN below everything
    assert eq.tolist() == [False, True, False, False]
    assert not_lt.tolist() == [True, True, False, True]
    import pytest

    with pytest.raises(xm.ShapeError, match="pred"):
        b.logical_not(x)

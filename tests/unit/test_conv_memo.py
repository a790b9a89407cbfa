"""conv_memo: the shape stage's convolution geometry goes to the creator of the same op only."""

from __future__ import annotations

from typing import Any

from mnnpy.ops import conv_memo


def _ops() -> tuple[Any, Any, Any]:
    return object(), object(), object()


def test_take_gives_the_kept_geometry_once() -> None:
    op, other, geo = _ops()
    conv_memo.keep((op, (1, 3, 8, 8), None), geo)
    assert conv_memo.take(op, (1, 3, 8, 8), None) is geo
    assert conv_memo.take(op, (1, 3, 8, 8), None) is None  # taken: forgotten


def test_take_refuses_another_op_or_shape() -> None:
    op, other, geo = _ops()
    for asked in [(other, (1, 3, 8, 8), None), (op, (1, 3, 8, 9), None), (op, (1, 3, 8, 8), (4,))]:
        conv_memo.keep((op, (1, 3, 8, 8), None), geo)
        assert conv_memo.take(*asked) is None
        assert conv_memo.take(op, (1, 3, 8, 8), None) is None  # a refused take forgets it too

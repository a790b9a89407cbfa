"""Select: CPU execution with broadcasting, layouts and dtypes vs reference."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import run_op
from tests.ops.test_gather import check

NC4HW4, NCHW = DimensionFormat.NC4HW4, DimensionFormat.NCHW


def cond(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(1).integers(-1, 2, shape).astype(np.int32)  # -1 counts as true


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
def test_same_shape(c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 2, c, 3, 3)).astype(np.float32)
    check(OpType.Select, [cond((2, c, 3, 3)), x, y], fmt=fmt)


@pytest.mark.parametrize(
    ("cs", "xs", "ys"),
    [((2, 1, 3, 1), (2, 5, 3, 4), ()), ((5, 1, 1), (), (2, 5, 3, 1)), ((), (4,), (3, 1))],
)
def test_broadcasting(cs: tuple, xs: tuple, ys: tuple) -> None:
    x = np.arange(np.prod(xs), dtype=np.int32).reshape(xs)
    y = -np.arange(np.prod(ys), dtype=np.int32).reshape(ys) - 1
    check(OpType.Select, [cond(cs), x, y], fmt=NCHW)
    check(OpType.Select, [cond(cs), x.astype(np.float32), y.astype(np.float32)], fmt=NC4HW4,
          consts={2: y.astype(np.float32)})  # fmt: skip


def test_fold_and_errors() -> None:
    c, x, y = cond((3,)), np.ones(3, np.float32), np.zeros(3, np.float32)
    check(OpType.Select, [c, x, y], consts={0: c, 1: x, 2: y})
    for args in ([c.astype(np.float32), x, y], [c, x, y.astype(np.int32)], [cond((2,)), x, y]):
        with pytest.raises(MNNError) as e:
            run_op(OpType.Select, args)
        assert e.value.code == ErrorCode.COMPUTE_SIZE_ERROR

"""ReverseSequence: CPU execution vs reference and an independent loop (dims, layouts, threads)."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy._schema.MNN.ReverseSequenceParam import ReverseSequenceParamT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpDef, OpParameter, OpType
from mnnpy.ops.reverse_sequence import reference
from mnnpy.tensor_format import DimensionFormat
from tests.helpers import assert_close, run_op

NC4HW4, NCHW, NHWC = DimensionFormat.NC4HW4, DimensionFormat.NCHW, DimensionFormat.NHWC
PT = OpParameter.ReverseSequenceParam


def param(batch: int, seq: int) -> ReverseSequenceParamT:
    p = ReverseSequenceParamT()
    p.batchDim, p.seqDim = batch, seq
    return p


def loop(x: np.ndarray, lens: np.ndarray, batch: int, seq: int) -> np.ndarray:
    out = x.copy()
    for p in np.ndindex(x.shape):
        n = lens[p[batch]]
        if p[seq] < n:
            q = list(p)
            q[seq] = n - 1 - p[seq]
            out[p] = x[tuple(q)]
    return out


def check(x: np.ndarray, lens: np.ndarray, batch: int, seq: int, fmt=NCHW) -> None:  # type: ignore[no-untyped-def]
    p = param(batch, seq)
    one, two = (
        run_op(OpType.ReverseSequence, [x, lens], p, PT, fmt=fmt, num_thread=t)[0] for t in (1, 2)
    )
    np.testing.assert_array_equal(one, two)
    op = OpDef(0, OpType.ReverseSequence, "op", (0, 1), (2,), p, PT, NHWC)
    assert_close(one, reference(op, [x, lens])[0])
    assert_close(one, loop(x, lens, batch % x.ndim, seq % x.ndim))


@pytest.mark.parametrize("fmt", [NCHW, NC4HW4])
@pytest.mark.parametrize("c", [1, 3, 4, 5, 17])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (1, 3), (-1, 2)])
def test_dims_and_layouts(dims: tuple[int, int], c: int, fmt: DimensionFormat) -> None:
    rng = np.random.default_rng(c)
    x = rng.standard_normal((2, c, 3, 5)).astype(np.float32)
    batch, seq = dims
    lens = rng.integers(0, x.shape[seq] + 1, x.shape[batch]).astype(np.int32)
    check(x, lens, batch, seq, fmt)


def test_int32_and_bad_length() -> None:
    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    check(x, np.array([4, 3, 2, 1], np.int32), 1, 0)
    with pytest.raises(MNNError) as e:
        check(x, np.array([5, 3, 2, 1], np.int32), 1, 0)
    assert e.value.code == ErrorCode.INVALID_VALUE

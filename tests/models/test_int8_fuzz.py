"""Corrupted int8 models: a clear MNNError naming the op or tensor, never a crash or a wrong run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy._schema.MNN.Net import Net as FbNet
from mnnpy._schema.MNN.Net import NetT
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import OpType, pack_net

MODEL = Path(__file__).resolve().parents[1] / "data" / "int8" / "cnn_int8.mnn"


def mutated(edit) -> bytes:
    raw = NetT.InitFromObj(FbNet.GetRootAs(MODEL.read_bytes(), 0))
    edit(raw)
    return pack_net(raw)


def conv(raw, name="conv_3"):
    return next(op for op in raw.oplists if op.name in (name, name.encode()))


def run(data: bytes) -> None:
    interp = mnnpy.Interpreter.from_buffer(data)
    session = interp.create_session()
    interp.get_session_input(session).copy_from(np.zeros((1, 3, 32, 32), np.float32))
    interp.run_session(session)


def expect(data: bytes, code: ErrorCode, *words: str) -> None:
    with pytest.raises(MNNError) as e:
        run(data)
    assert e.value.code == code, str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_unmutated_model_runs():
    run(mutated(lambda raw: None))


@pytest.mark.parametrize("count", [0, 7, 9])
def test_weight_scale_count_mismatch(count):
    def edit(raw):
        q = conv(raw).main.quanParameter
        q.alpha = list(np.resize(np.asarray(q.alpha), count))

    code = ErrorCode.INVALID_VALUE
    expect(mutated(edit), code, "conv_3", f"{count} weight scales")


def test_asymmetric_scales_are_refused():
    def edit(raw):
        q = conv(raw).main.quanParameter
        q.alpha = list(np.repeat(np.asarray(q.alpha), 2))

    expect(mutated(edit), ErrorCode.NOT_SUPPORT, "conv_3", "asymmetric")


@pytest.mark.parametrize("cut", [1, 50, 400])
def test_int8_weight_buffer_too_short(cut):
    def edit(raw):
        q = conv(raw, "conv_9").main.quanParameter
        q.buffer = q.buffer[:-cut]

    expect(mutated(edit), ErrorCode.INVALID_VALUE, "conv_9")


def test_quant_info_index_out_of_range():
    def edit(raw):
        raw.extraTensorDescribe[0].index = 1000

    expect(mutated(edit), ErrorCode.INVALID_VALUE, "quantInfo", "1000")


def test_op_mnn_runs_in_int8_without_an_int8_kernel_is_refused():
    """A PReLU between quantized tensors runs in int8 in MNN: refused, not run in float."""
    from mnnpy._schema.MNN.Op import OpT

    def edit(raw):
        fc = conv(raw, "y__matmul_converted")
        out = fc.outputIndexes[0]
        raw.tensorName.append("soft")
        soft = OpT()
        soft.type, soft.name = OpType.PReLU, "soft"
        soft.inputIndexes, soft.outputIndexes = [out], [len(raw.tensorName) - 1]
        for op in raw.oplists:
            if op is not fc and op.inputIndexes is not None:
                op.inputIndexes = [
                    soft.outputIndexes[0] if i == out else i for i in op.inputIndexes
                ]
        raw.oplists.insert(raw.oplists.index(fc) + 1, soft)
        desc = next(d for d in raw.extraTensorDescribe if d.index == out)
        import copy

        extra = copy.deepcopy(desc)
        extra.index = soft.outputIndexes[0]
        raw.extraTensorDescribe.append(extra)

    expect(mutated(edit), ErrorCode.NOT_SUPPORT, "PReLU")

"""int8 models from MNN's post-training quantizer (``tools/make_int8_models.py``) against MNN's
own int8 Session outputs (CPU, 1 thread) on the same file.

Tolerance: exact, for both models. mnnpy's int8 kernels follow the arithmetic of MNN 3.6.1's
x86 (AVX2) CPU backend step by step (integer dot products; the float requantization in MNN's
order, rounding by +-0.5 and truncation; the pooling and BinaryOp formulas), so the int8
values, and the floats dequantized from them, are the same numbers.

- ``cnn_int8``: conv 3x3 + relu, depthwise + relu, 1x1, residual Add + relu, max pool,
  strided conv, average pool, global pool, FC (a Reshape whose scale differs: int8 -> float ->
  int8 casts, as MNN).
- ``int8_edges``: 17 channels, batch 2, 5x5 stride 2 + ReLU6, depthwise stride 2, a max pool
  over values of both signs (MNN compares its uint8 storage as signed bytes: 862 of the 1224
  pooled values differ from the true maximum, and the output still matches), an average pool
  over the padding, Sub and Mul in int8.
- ``int8_group_concat``: a grouped conv split by the converter into Slice, four convs and a
  Concat, and a Concat of two branches (data movement that runs in float here between casts,
  in int8 in MNN: the same integers, as the scales are equal).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.quant import plan_quant

DATA = Path(__file__).resolve().parents[1] / "data" / "int8"
MODELS = ["cnn_int8", "int8_edges", "int8_group_concat"]


def load_case(name: str) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return DATA / f"{name}.mnn", inputs, outputs


def run(path: Path, inputs: dict[str, np.ndarray], threads: int, runs: int = 1) -> list[dict]:
    interp = mnnpy.Interpreter(str(path))
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    results = []
    for _ in range(runs):
        for name, value in inputs.items():
            interp.get_session_input(session, name).copy_from(value)
        interp.run_session(session)
        results.append({n: t.numpy() for n, t in interp.get_session_output_all(session).items()})
    return results


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", MODELS)
def test_int8_model_equals_mnn(name, threads):
    path, inputs, expected = load_case(name)
    for got in run(path, inputs, threads, runs=2):
        assert set(got) == set(expected)
        for key, value in expected.items():
            assert got[key].dtype == np.float32 and got[key].shape == value.shape
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name}:{key}")


INT8_OPS = {
    "cnn_int8": {"ConvInt8", "DepthwiseConvInt8", "Pooling", "BinaryOp", "FloatToInt8"},
    "int8_edges": {"ConvInt8", "DepthwiseConvInt8", "Pooling", "BinaryOp", "FloatToInt8"},
    "int8_group_concat": {"ConvInt8", "Pooling", "Pooling3D", "FloatToInt8"},
}


@pytest.mark.parametrize("name", MODELS)
def test_int8_model_runs_in_int8(name):
    """The convolutions, pools and binary ops run in int8, as in MNN's trace, and the user
    reads float32 outputs."""
    path, _, _ = load_case(name)
    plan = plan_quant(mnnpy.net.load_net(path.read_bytes()))
    kinds = {op.type_name for op in plan.ops if op.outputs and op.outputs[0] in plan.int8}
    assert INT8_OPS[name] <= kinds
    assert not any(op.type_name in ("Convolution", "ConvolutionDepthwise") for op in plan.ops)
    interp = mnnpy.Interpreter(str(path))
    session = interp.create_session()
    assert all(t.dtype == np.float32 for t in interp.get_session_output_all(session).values())

"""The benchmark models (real converter output, generated and cached, not committed) against
MNN's own Session output on the same file and input, at 1 and 2 threads.

Reference per model: MNN's output, except where MNN's own kernels drift from the ONNX definition
by more than the tolerance (measured MNN vs ONNX Runtime on the source graph, recorded by
tools/make_bench_models.py): there the ONNX Runtime output on the source ONNX graph is the
reference, as the issue allows. The PyTorch-exported models need torch (the bench extra) and are
skipped without it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from tests.helpers import ATOL, RTOL

ROOT = Path(__file__).resolve().parents[2]
# model -> (reference key prefix, why)
REFERENCES = {
    "mobilenet_v2": ("output", "MNN"),
    "squeezenet1_1": ("output", "MNN"),
    "shufflenet_v2": ("output", "MNN"),
    "resnet18": ("ort", "MNN's 3x3 convolutions (Winograd) are 2.3e-4 off ONNX Runtime"),
    "unet_small": ("ort", "MNN's 3x3 convolutions are 3.1e-3 off ONNX Runtime on this model"),
    "transformer": ("ort", "MNN's fused LayerNorm/GELU sit ~7e-4 off the ONNX definition"),
    # exported from PyTorch (tools/bench_torch_*.py)
    "mobilenet_v2_pt": ("output", "MNN"),
    "resnet18_pt": ("ort", "MNN's 3x3 convolutions (Winograd) are 2.1e-4 off ONNX Runtime"),
    "squeezenet1_1_pt": ("output", "MNN"),
    "shufflenet_v2_pt": ("output", "MNN"),
    # the converter turns the exported erf GELU into MNN's GELU (tanh form): 1e-3 to 4e-3 off ORT
    "transformer_pt": ("output", "MNN"),
    "efficientnet_b0": ("output", "MNN"),
    "convnext_atto": ("output", "MNN"),
    "llama_decoder": ("output", "MNN"),
    "audio_encoder": ("output", "MNN"),
}


@pytest.fixture(scope="module")
def models() -> dict[str, Path]:
    pytest.importorskip("MNN", reason="the mnn wheel (test extra) records the reference outputs")
    pytest.importorskip("onnx", reason="the benchmark models are built with onnx.helper")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import TORCH_MODELS, ensure_models
    finally:
        sys.path.pop(0)
    torch = importlib.util.find_spec("torch") is not None
    return ensure_models([n for n in REFERENCES if torch or n not in TORCH_MODELS])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(REFERENCES))
def test_bench_model_matches_reference(models, name, threads):
    if name not in models:
        pytest.skip("exported from PyTorch: needs torch (the bench extra)")
    path = models[name]
    prefix, why = REFERENCES[name]
    with np.load(path.with_suffix(".npz")) as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        expected = {k[len(prefix) + 1 :]: z[k] for k in z.files if k.startswith(prefix + ":")}
    interp = mnnpy.Interpreter(path)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
    for key, value in inputs.items():
        interp.get_session_input(session, key).copy_from(value)
    interp.run_session(session)
    for key, value in expected.items():
        got = interp.get_session_output(session, key).numpy()
        np.testing.assert_allclose(
            got, value, rtol=RTOL, atol=ATOL, err_msg=f"{name}:{key} vs {prefix} ({why})"
        )

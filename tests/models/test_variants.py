"""End to end on the deployment variants MNN's converter writes (tests/data/variants).

Every ``<model>.<variant>.mnn`` made by ``tools/make_variant_models.py`` (fp16, weight-quantized
2-8 bits symmetric / asymmetric / block-wise, external weights, static, full int8) is loaded by
``mnnpy.Interpreter`` and run on the stored input; the oracle is MNN's own Session output on the
same file (CPU, 1 thread), stored beside it. One test id per file and memory mode, so a run shows
which variants work.

Tolerances, relative to the output scale ``s = max |golden|``:

* weight-only variants (fp32 / fp16 / wq* / external / static): ``rtol 1e-3, atol 1e-4 * s``.
  Both engines decode the same stored numbers into float32 weights and compute in float32, so
  only summation order differs.
* int8 files (``mnnquant``): ``atol INT8_ATOL[model] * s`` (see there). MNN computes these with
  int8 activations; a re-implementation that follows its rounding and clamping lands within a
  few steps of the last int8 tensors' scales, not within float rounding.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.errors import ErrorCode, MNNError

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ROOT / "tests" / "data" / "variants"
FILES = sorted(p.name[: -len(".mnn")] for p in VARIANTS.glob("*.mnn"))
EXTERNAL = [n for n in FILES if (VARIANTS / f"{n}.mnn.weight").exists()]

RTOL, ATOL_OF_SCALE = 1e-3, 1e-4
# Fraction of the output scale allowed between mnnpy's and MNN's int8 runs: 0, all three files
# are exact (measured in both memory modes). Their int8 convolutions, pooling, element-wise ops
# and UnaryOp tables follow MNN's rounding and clamping; cnn's Deconvolution runs in float between
# casts on the dequantized int8 weights, and transformer's LayerNorm and Softmax dequantize,
# compute in float and quantize (MNN's CPULayerNorm / CPUSoftmax int8 paths), as MNN does.
INT8_ATOL = {"cnn": 0.0, "transformer": 0.0, "conv3d": 0.0}
MEMORY_MODES = {"normal": "Memory_Normal", "low": "Memory_Low"}


def load_case(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(VARIANTS / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return inputs, outputs


def run(interp: mnnpy.Interpreter, inputs: dict[str, np.ndarray], memory: str) -> dict:
    config = mnnpy.ScheduleConfig(
        num_thread=1, backend_config=mnnpy.BackendConfig(memory=MEMORY_MODES[memory])
    )
    session = interp.create_session(config)
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    interp.run_session(session)
    return {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}


def assert_matches(name: str, got: dict, expected: dict) -> None:
    model, variant = name.split(".", 1)
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert got[key].shape == want.shape, key
        scale = float(np.max(np.abs(want))) or 1.0
        if variant == "int8":
            rtol, atol = 0.0, INT8_ATOL[model] * scale
        else:
            rtol, atol = RTOL, ATOL_OF_SCALE * scale
        np.testing.assert_allclose(
            got[key], want, rtol=rtol, atol=atol, err_msg=f"{name}:{key} (scale {scale:.3g})"
        )


def test_variant_files_present():
    """The generator's full set: 3 models x 13 variants, goldens and external weights."""
    models = {n.split(".", 1)[0] for n in FILES}
    variants = {n.split(".", 1)[1] for n in FILES}
    assert models == {"cnn", "transformer", "conv3d"}
    assert {"fp32", "fp16", "wq8", "wq4", "wq2", "wq8_asym", "wq4_asym_b32", "wq8_b32"} <= variants
    assert {"external", "wq4_external", "static", "int8"} <= variants
    assert len(FILES) == 39
    assert len(EXTERNAL) == 6
    for name in FILES:
        assert (VARIANTS / f"{name}.npz").exists(), name
    total = sum(p.stat().st_size for p in VARIANTS.iterdir())
    assert total < 2_000_000, total


@pytest.mark.parametrize("memory", sorted(MEMORY_MODES))
@pytest.mark.parametrize("name", FILES)
def test_variant_matches_mnn(name: str, memory: str):
    inputs, expected = load_case(name)
    interp = mnnpy.Interpreter(VARIANTS / f"{name}.mnn")  # external weights found beside it
    assert_matches(name, run(interp, inputs, memory), expected)


@pytest.mark.parametrize("name", EXTERNAL)
def test_external_weights_given_explicitly(name: str, tmp_path: Path):
    """``from_buffer(data, external=...)`` with a path and with bytes, from another folder."""
    inputs, expected = load_case(name)
    data = (VARIANTS / f"{name}.mnn").read_bytes()
    weight = VARIANTS / f"{name}.mnn.weight"
    for external in (str(weight), weight.read_bytes()):
        interp = mnnpy.Interpreter.from_buffer(data, external=external)
        assert_matches(name, run(interp, inputs, "normal"), expected)
    # a copy in another folder, renamed, with its weights beside it under the new name
    shutil.copyfile(VARIANTS / f"{name}.mnn", tmp_path / "renamed.mnn")
    shutil.copyfile(weight, tmp_path / "renamed.mnn.weight")
    interp = mnnpy.Interpreter(tmp_path / "renamed.mnn")
    assert_matches(name, run(interp, inputs, "normal"), expected)


@pytest.mark.parametrize("name", EXTERNAL)
def test_external_weights_missing_or_short(name: str, tmp_path: Path):
    """No ``.weight`` beside the file: FILE_NOT_EXIST naming it; a truncated one: INVALID_VALUE."""
    inputs, _ = load_case(name)
    shutil.copyfile(VARIANTS / f"{name}.mnn", tmp_path / "m.mnn")
    with pytest.raises(MNNError) as info:
        run(mnnpy.Interpreter(tmp_path / "m.mnn"), inputs, "normal")
    assert info.value.code == ErrorCode.FILE_NOT_EXIST
    assert "m.mnn.weight" in str(info.value)
    weight = (VARIANTS / f"{name}.mnn.weight").read_bytes()
    (tmp_path / "m.mnn.weight").write_bytes(weight[: len(weight) // 2])
    with pytest.raises(MNNError) as info:
        run(mnnpy.Interpreter(tmp_path / "m.mnn"), inputs, "normal")
    assert info.value.code == ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("name", ["cnn.wq4", "cnn.external"])
def test_cli_run(name: str, tmp_path: Path):
    """``python -m mnnpy run FILE --input x=... --save out.npz`` gives MNN's output."""
    inputs, expected = load_case(name)
    np.save(tmp_path / "x.npy", inputs["x"])
    out = tmp_path / "out.npz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "mnnpy", "run", str(VARIANTS / f"{name}.mnn")]
    cmd += ["--input", f"x={tmp_path / 'x.npy'}", "--runs", "1", "--save", str(out)]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(out) as z:
        got = {k[7:]: z[k] for k in z.files}
    assert_matches(name, got, expected)

"""Models whose weights live in ``<model>.weight``: found, read, checked, refused clearly.

The external model is a committed model with its Convolution tables moved to a weight file
the way ``--saveExternalData`` lays them out (``external = [offset, weight bytes, bias
bytes]``, tables back to back); its output must equal MNN's golden output of the original.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
import mnnpy.compat as compat
from mnnpy._schema.MNN.Net import NetT
from mnnpy._schema.MNN.OpParameter import OpParameter
from mnnpy.errors import ErrorCode, MNNError
from mnnpy.net import pack_net

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL = DATA / "conv_relu_pool_fc.mnn"


def externalize(src: Path) -> tuple[bytes, bytes]:
    """The model bytes without Convolution weights, and the weight file holding them."""
    raw = NetT.InitFromPackedBuf(src.read_bytes(), 0)
    blob, offset = bytearray(b"head"), 4
    for op in raw.oplists:
        if op.mainType != OpParameter.Convolution2D:
            continue
        p = op.main
        w, b = np.asarray(p.weight, "<f4").tobytes(), np.asarray(p.bias, "<f4").tobytes()
        p.external = np.array([offset, len(w), len(b)], np.int64)
        p.weight, p.bias = None, None
        blob += w + b
        offset += len(w) + len(b)
    return pack_net(raw), bytes(blob)


def run(interp: mnnpy.Interpreter, x: np.ndarray) -> np.ndarray:
    session = interp.create_session()
    interp.get_session_input(session, "x").copy_from(x)
    interp.run_session(session)
    return interp.get_session_output(session, "prob").numpy()


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "conv_relu_pool_fc.npz"))


def test_weight_file_beside_the_model(tmp_path: Path, golden) -> None:
    model, weights = externalize(MODEL)
    (tmp_path / "m.mnn").write_bytes(model)
    (tmp_path / "m.mnn.weight").write_bytes(weights)
    got = run(mnnpy.Interpreter(tmp_path / "m.mnn"), golden["input:x"])
    np.testing.assert_allclose(got, golden["output:prob"], rtol=1e-3, atol=1e-4)
    # the same through from_buffer with a path and with the bytes, and through compat
    for source in (tmp_path / "m.mnn.weight", weights):
        interp = mnnpy.Interpreter.from_buffer(model, external=source)
        np.testing.assert_array_equal(run(interp, golden["input:x"]), got)
    c = compat.Interpreter(str(tmp_path / "m.mnn"))
    s = c.createSession({"numThread": 1})
    x = compat.Tensor((1, 3, 32, 32), compat.Halide_Type_Float, golden["input:x"],
                      compat.Tensor_DimensionType_Caffe)  # fmt: skip
    c.getSessionInput(s, "x").copyFrom(x)
    c.runSession(s)
    out = np.asarray(c.getSessionOutput(s, "prob").getNumpyData())
    np.testing.assert_array_equal(out.reshape(got.shape), got)


def test_missing_weight_file(tmp_path: Path) -> None:
    model, weights = externalize(MODEL)
    (tmp_path / "m.mnn").write_bytes(model)
    interp = mnnpy.Interpreter(tmp_path / "m.mnn")
    with pytest.raises(MNNError) as err:
        interp.create_session()
    assert err.value.code == ErrorCode.FILE_NOT_EXIST
    assert "m.mnn.weight" in str(err.value) and "conv_3" in str(err.value)
    with pytest.raises(MNNError) as err:
        mnnpy.Interpreter.from_buffer(model)
    assert err.value.code == ErrorCode.FILE_NOT_EXIST
    # pymnn's order: construct, then name the weight file, then create sessions
    (tmp_path / "elsewhere.bin").write_bytes(weights)
    interp.set_external_file(tmp_path / "elsewhere.bin")
    interp.create_session()


@pytest.mark.parametrize("keep", [0, 4, 100, -1])
def test_short_weight_file(tmp_path: Path, keep: int) -> None:
    model, weights = externalize(MODEL)
    with pytest.raises(MNNError) as err:
        mnnpy.Interpreter.from_buffer(model, external=weights[:keep])
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert "external bytes" in str(err.value) and "Convolution" in str(err.value)


def test_dump_shows_storage(tmp_path: Path, capsys) -> None:
    from mnnpy.tooling.cli import main

    model, weights = externalize(MODEL)
    (tmp_path / "m.mnn").write_bytes(model)
    assert main(["dump", str(tmp_path / "m.mnn")]) == 0  # no weight file: still dumps
    out = capsys.readouterr().out
    assert "weight: unreadable ([FILE_NOT_EXIST]" in out and "shapes unavailable" in out
    (tmp_path / "m.mnn.weight").write_bytes(weights)
    assert main(["dump", str(tmp_path / "m.mnn")]) == 0
    out = capsys.readouterr().out
    assert "weight: float32 [8, 3, 3, 3], 864 bytes, external" in out
    assert "weight: float32 [10, 16, 1, 1], 640 bytes, external" in out
    assert "unavailable" not in out and "unreadable" not in out

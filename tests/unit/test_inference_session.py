"""mnnpy.InferenceSession, the one-call API: against ONNX Runtime, MNN and the Session API.

The ONNX sources of the test models are rebuilt in code by the generators that made the ``.mnn``
files (``tools/make_test_models.py``, ``tools/make_variant_models.py``: fixed seeds, so the same
graphs), and run by ONNX Runtime on the same inputs. Batch sizes the ONNX graphs do not allow are
compared with MNN's own runtime (the ``mnn`` wheel, Session API, resized) and with mnnpy's
Interpreter / Session API.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.errors import ErrorCode, InputDataError, InvalidValueError
from mnnpy.testing import ATOL, RTOL

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _tools():
    pytest.importorskip("onnx")
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    import make_test_models
    import make_variant_models

    return make_test_models, make_variant_models


def _ort(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), sess


def _mnn_wheel(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model run by MNN's runtime (CPU, 1 thread), inputs resized to the arrays' shapes."""
    MNN = pytest.importorskip("MNN")
    interp = MNN.Interpreter(str(path))
    sess = interp.createSession({"numThread": 1})
    for name, x in feeds.items():
        interp.resizeTensor(interp.getSessionInput(sess, name), tuple(x.shape))
    interp.resizeSession(sess)
    for name, x in feeds.items():
        t = interp.getSessionInput(sess, name)
        kind = MNN.Halide_Type_Float if x.dtype == np.float32 else MNN.Halide_Type_Int
        t.copyFrom(MNN.Tensor(list(x.shape), kind, x, t.getDimensionType()))
    interp.runSession(sess)
    out = {}
    for name, t in interp.getSessionOutputAll(sess).items():
        shape = list(t.getShape())
        host = MNN.Tensor(shape, MNN.Halide_Type_Float, np.zeros(shape, np.float32), 1)
        t.copyToHostTensor(host)
        out[name] = np.array(host.getNumpyData(), np.float32).reshape(shape)
    return out


def _session_api(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    net = mnnpy.Interpreter(path)
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=1))
    for name, x in feeds.items():
        net.resize_tensor(net.get_session_input(session, name), x.shape)
    net.resize_session(session)
    for name, x in feeds.items():
        net.get_session_input(session, name).copy_from(x)
    net.run_session(session)
    return {n: t.numpy() for n, t in net.get_session_output_all(session).items()}


@pytest.mark.parametrize(
    "name", ["conv_relu_pool_fc", "residual_add", "nhwc_input", "batch2"], ids=str
)
def test_matches_onnxruntime_on_the_source_graph(name: str) -> None:
    make_test_models, _ = _tools()
    model, feeds = getattr(make_test_models, f"build_{name}")()
    expected, ort_sess = _ort(model, feeds)
    sess = mnnpy.InferenceSession(DATA / f"{name}.mnn", threads=1)
    got = sess.run(None, feeds)
    assert [o.name for o in sess.get_outputs()] == [o.name for o in ort_sess.get_outputs()]
    assert [i.name for i in sess.get_inputs()] == [i.name for i in ort_sess.get_inputs()]
    for a, e in zip(got, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL)
    for mine, theirs in zip(sess.get_inputs(), ort_sess.get_inputs(), strict=True):
        assert mine.shape == theirs.shape and mine.type == theirs.type


def test_int64_input_ids_are_converted_when_they_fit() -> None:
    """transformer.fp32: an int32 `ids` input (its ONNX source is int32); int64 arrays fit."""
    _, make_variant_models = _tools()
    model, feeds = make_variant_models.build_transformer()
    expected, _ = _ort(model, feeds)
    sess = mnnpy.InferenceSession(DATA / "variants" / "transformer.fp32.mnn", threads=1)
    (arg,) = sess.get_inputs()
    assert (arg.name, arg.dtype, arg.type) == ("ids", np.dtype(np.int32), "tensor(int32)")
    ids64 = feeds["ids"].astype(np.int64)
    (y,) = sess.run(None, {"ids": ids64})
    np.testing.assert_allclose(y, expected[0], rtol=RTOL, atol=ATOL)
    (y32,) = sess.run(["y"], {"ids": feeds["ids"]})
    np.testing.assert_array_equal(y, y32)
    bad = ids64.copy()
    bad[0, 5] = 1 << 40
    with pytest.raises(InputDataError) as e:
        sess.run(None, {"ids": bad})
    assert e.value.code == ErrorCode.INPUT_DATA_ERROR
    assert "'ids'" in str(e.value) and str(1 << 40) in str(e.value) and "(0, 5)" in str(e.value)
    bad[0, 5] = -(1 << 31) - 1
    with pytest.raises(InputDataError, match="'ids'"):
        sess.run(None, {"ids": bad})
    with pytest.raises(InputDataError, match=r"takes int32.*float32"):
        sess.run(None, {"ids": ids64.astype(np.float32)})


def test_new_shapes_resize_automatically() -> None:
    """Batch 1 -> 3 -> 1 -> 2 on the same session: each equals MNN's runtime and the Session API."""
    path = DATA / "conv_relu_pool_fc.mnn"
    sess = mnnpy.InferenceSession(path, threads=1)
    rng = np.random.default_rng(7)
    for batch in (1, 3, 1, 2):
        x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
        (got,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(got, _mnn_wheel(path, {"x": x})["prob"], rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(got, _session_api(path, {"x": x})["prob"])
        assert sess.get_outputs()[0].shape == [batch, 10]
    x = rng.standard_normal((1, 3, 40, 24)).astype(np.float32)  # a new spatial size too
    (got,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, _mnn_wheel(path, {"x": x})["prob"], rtol=RTOL, atol=ATOL)


def test_nhwc_input_and_bytes_source() -> None:
    path = DATA / "nhwc_dformat.mnn"
    sess = mnnpy.InferenceSession(path.read_bytes(), threads=1)
    (arg,) = sess.get_inputs()
    assert arg.layout == "NHWC"
    with np.load(DATA / "nhwc_dformat.npz") as z:
        x, y = z[f"input:{arg.name}"], z[f"output:{sess.get_outputs()[0].name}"]
    (got,) = sess.run(None, {arg.name: x})
    np.testing.assert_allclose(got, y, rtol=RTOL, atol=ATOL)


def test_bad_feeds_are_clear_errors() -> None:
    sess = mnnpy.InferenceSession(DATA / "residual_add.mnn", threads=1)
    x = np.zeros((1, 4, 15, 15), np.float32)
    with pytest.raises(InvalidValueError, match=r"no input 'y'.*\['x'\]"):
        sess.run(None, {"x": x, "y": x})
    with pytest.raises(InvalidValueError, match=r"\['x'\] missing"):
        sess.run(None, {})
    with pytest.raises(InvalidValueError, match=r"no output.*'nope'.*\['y'\]"):
        sess.run(["nope"], {"x": x})
    with pytest.raises(InputDataError, match=r"'x' has rank 4.*\(4, 15, 15\)"):
        sess.run(None, {"x": x[0]})
    with pytest.raises(InputDataError, match=r"'x' takes float32.*float64"):
        sess.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(InvalidValueError, match="mapping"):
        sess.run(None, [x])  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="unknown backend 'gpu'"):
        mnnpy.InferenceSession(DATA / "residual_add.mnn", backend="gpu")
    with pytest.raises(InvalidValueError, match="memory mode"):
        mnnpy.InferenceSession(DATA / "residual_add.mnn", memory="tiny")
    (y,) = sess.run(None, {"x": x})  # still usable after the errors
    assert y.shape == (1, 7)


def test_options_reach_the_session() -> None:
    sess = mnnpy.InferenceSession(
        DATA / "residual_add.mnn", threads=2, memory="low", budget=64 << 20
    )
    backend = sess.session.backend
    assert backend.num_thread == 2 and backend.low_memory and backend.memory_budget == 64 << 20
    default = mnnpy.InferenceSession(DATA / "residual_add.mnn")
    assert default.session.backend.num_thread == mnnpy.config.default_num_thread()
    with pytest.raises(mnnpy.MNNError) as e:
        mnnpy.InferenceSession(DATA / "residual_add.mnn", budget=1024)
    assert e.value.code == ErrorCode.OUT_OF_MEMORY


def test_output_subset_in_requested_order() -> None:
    path = DATA / "static" / "gather.mnn"
    sess = mnnpy.InferenceSession(path, threads=1)
    with np.load(path.with_suffix(".npz")) as z:
        x = z["input:x"]
        y3, y0 = z["output:y3"], z["output:y0"]
    got = sess.run(["y3", "y0"], {"x": x})
    np.testing.assert_allclose(got[0], y3, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], y0, rtol=RTOL, atol=ATOL)
    assert [o.name for o in sess.get_outputs()] == ["y0", "y1", "y2", "y3"]


def test_bench_model_matches_onnxruntime() -> None:
    """A benchmark model (generated on first use into ~/.cache/mnnpy/bench) and its .onnx."""
    bench = Path.home() / ".cache" / "mnnpy" / "bench"
    if not (bench / "mobilenet_v2.onnx").exists() or not (bench / "mobilenet_v2.mnn").exists():
        pytest.skip("benchmark models not generated (python tools/make_bench_models.py)")
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(bench / "mobilenet_v2.onnx"))
    sess = mnnpy.InferenceSession(bench / "mobilenet_v2.mnn", threads=1)
    (arg,) = sess.get_inputs()
    x = np.random.default_rng(3).standard_normal([d or 1 for d in arg.shape]).astype(np.float32)
    expected, _ = _ort(model, {model.graph.input[0].name: x})
    (got,) = sess.run(None, {arg.name: x})
    np.testing.assert_allclose(got, expected[0], rtol=RTOL, atol=ATOL)


def test_readme_example_runs() -> None:
    """The first code block of the README's "Use it from Python" section, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it from Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "InferenceSession" in code
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["y"].shape == (2, 10)

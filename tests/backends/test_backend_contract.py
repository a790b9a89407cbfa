"""The backend contract is safe for a backend written from MNN's documentation alone.

``tests/backends/docs_backend.py`` keeps its tensors in its own memory (handles to bytearrays)
and sets no mnnpy attribute; models must still match the CPU backend with it (reads of its
tensors go through its ``on_copy_buffer``), and each way it can break the contract must be an
``MNNError`` with MNN's code that names the backend, the hook and the tensor.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.backend import ForwardType, registry
from mnnpy.errors import ErrorCode, MNNError
from tests.backends.docs_backend import DocsBackend, DocsCreator

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
USER_0, CPU = ForwardType.USER_0, ForwardType.CPU
RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture
def docs():
    registry._CREATORS.pop(USER_0, None)
    DocsBackend.fault, DocsBackend.declare_host = None, False
    assert mnnpy.insert_extra_backend_creator(USER_0, DocsCreator())
    yield
    DocsBackend.fault, DocsBackend.declare_host = None, False
    registry._CREATORS.pop(USER_0, None)


def _inputs(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(path.with_suffix(".npz")) as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        golden = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return inputs, golden


def _session(path: Path, config: mnnpy.ScheduleConfig):
    interp = mnnpy.Interpreter(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback warning
        session = interp.create_session(config)
    return interp, session


def _run(path: Path, config: mnnpy.ScheduleConfig):
    interp, session = _session(path, config)
    inputs, _ = _inputs(path)
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    interp.run_session(session)
    outs = {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
    return interp, session, outs


DOCS = mnnpy.ScheduleConfig(type=USER_0, backup_type=CPU, num_thread=1)
ALL_CPU = mnnpy.ScheduleConfig(num_thread=1)


def _held_by_docs(session) -> list:
    return [t for t in session.tensors if isinstance(t.describe.backend, DocsBackend)]


def test_residual_add_matches_cpu_and_mnn(docs):
    path = DATA / "residual_add.mnn"
    _, _, want = _run(path, ALL_CPU)
    interp, session, got = _run(path, DOCS)
    _, golden = _inputs(path)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(got[name], golden[name], rtol=RTOL, atol=ATOL, err_msg=name)
    placed = Counter((p.backend, p.op_type) for p in session.placement())
    assert placed[("USER_0", "Convolution")] == 4 and placed[("USER_0", "BinaryOp")] == 1
    held = _held_by_docs(session)
    # the runtime recorded the owner itself; the backend never gave anyone host memory
    assert held and all(t.host is None for t in held)
    count, nbytes = session.copy_stats()
    backend = session.backend
    before = backend.copies
    interp.run_session(session)  # every copy of a run goes through its on_copy_buffer
    assert count > 0 and nbytes > 0 and backend.copies - before == count


def test_every_op_output_is_readable_through_the_copy_hook(docs):
    path = DATA / "residual_add.mnn"
    seen: dict[str, dict[str, np.ndarray]] = {}
    for key, config in (("cpu", ALL_CPU), ("docs", DOCS)):
        interp, session = _session(path, config)
        inputs, _ = _inputs(path)
        for name, value in inputs.items():
            interp.get_session_input(session, name).copy_from(value)
        seen[key] = {}

        def after(outputs, info, table=seen[key]):
            table[info.name] = outputs[0].numpy()
            return True

        assert interp.run_session_with_callback(session, None, after) == ErrorCode.NO_ERROR
    assert seen["cpu"].keys() == seen["docs"].keys()
    for name, value in seen["cpu"].items():
        np.testing.assert_allclose(seen["docs"][name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.fixture(scope="module")
def mobilenet():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import ensure_models

        path = ensure_models(["mobilenet_v2"])["mobilenet_v2"]
    except Exception as e:  # noqa: BLE001 - any failure to build the model means "skip"
        pytest.skip(f"cannot generate the mobilenet_v2 benchmark model (needs mnn, onnx): {e}")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    _, _, want = _run(path, ALL_CPU)
    return path, want


def test_mobilenet_v2_with_cpu_backup_matches_all_cpu(docs, mobilenet):
    """The issue's case: it failed with 'AssertionError: tensor ... has no memory'."""
    path, want = mobilenet
    _, session, got = _run(path, DOCS)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
    placed = Counter((p.backend, p.op_type) for p in session.placement())
    assert placed[("USER_0", "Convolution")] >= 30 and placed[("USER_0", "BinaryOp")] >= 8
    assert placed[("CPU", "ConvolutionDepthwise")] >= 15  # group > 1: its creator said no
    assert session.copy_stats()[0] >= 30
    assert all(t.host is None for t in _held_by_docs(session))


# -- a backend that breaks the contract -------------------------------------------------------

HOOK = r"USER_0\.{hook}\('[^']+'(, '[^']+')?\)"


def _fails(path: Path = DATA / "residual_add.mnn") -> MNNError:
    with pytest.raises(MNNError) as e:
        _run(path, DOCS)
    assert not isinstance(e.value.__cause__, AssertionError)
    return e.value


@pytest.mark.parametrize(
    ("fault", "hook", "code", "says"),
    [
        ("acquire_false", "on_acquire_buffer", ErrorCode.OUT_OF_MEMORY, "returned False"),
        ("acquire_nonsense", "on_acquire_buffer", ErrorCode.INVALID_VALUE, "'yes please'"),
        ("release_raises", "on_release_buffer", ErrorCode.INVALID_VALUE, "raised KeyError"),
        ("copy_raises", "on_copy_buffer", ErrorCode.INVALID_VALUE, "DMA engine timed out"),
        ("copy_wrong_shape", "on_copy_buffer", ErrorCode.INPUT_DATA_ERROR, "of shape"),
        ("copy_rebinds_host", "on_copy_buffer", ErrorCode.INVALID_VALUE, "float64"),
        ("copy_reenters", "on_copy_buffer", ErrorCode.INVALID_VALUE, "from inside itself"),
        ("no_copy", "on_copy_buffer", ErrorCode.NOT_SUPPORT, "is not implemented"),
    ],
)
def test_a_broken_hook_is_an_mnn_error_naming_backend_hook_tensor(docs, fault, hook, code, says):
    DocsBackend.fault = fault
    error = _fails()
    assert error.code == code, str(error)
    assert re.search(HOOK.format(hook=hook), str(error)), str(error)
    assert says in str(error)
    assert error.op_name  # the pipeline named the op as well


def test_host_memory_declared_but_not_given(docs):
    DocsBackend.declare_host = True  # memory_kind "host", yet tensor.host is never set
    error = _fails()
    assert error.code == ErrorCode.INVALID_VALUE and error.phase == "resize"
    message = str(error)
    assert "USER_0.on_allocate_buffer()" in message and "no memory" in message
    assert re.search(r"tensor '[^']+'", message)


def test_reading_an_output_through_a_broken_copy_hook(docs):
    interp, session, _ = _run(DATA / "residual_add.mnn", DOCS)
    held = next(t for t in _held_by_docs(session) if t.name == "relu_5")
    DocsBackend.fault = "copy_raises"
    with pytest.raises(MNNError) as e:
        held.numpy()
    assert e.value.code == ErrorCode.INVALID_VALUE
    assert "USER_0.on_copy_buffer('relu_5', 'relu_5')" in str(e.value)
    assert isinstance(e.value.__cause__, RuntimeError)


def test_a_copy_that_rebinds_host_memory_leaves_the_session_usable(docs):
    path = DATA / "residual_add.mnn"
    ((name, x),) = _inputs(path)[0].items()
    x2 = np.random.default_rng(5).standard_normal(x.shape).astype(x.dtype)
    results = {}
    for key, config in (("cpu", ALL_CPU), ("docs", DOCS)):
        interp, session, _ = _run(path, config)
        if key == "docs":
            DocsBackend.fault = "copy_rebinds_host"
            with pytest.raises(MNNError, match="replaced the host memory"):
                interp.run_session(session)
            DocsBackend.fault = None
        interp.get_session_input(session, name).copy_from(x2)  # new data: nothing stale passes
        interp.run_session(session)  # the CPU mirror got its planned memory back
        results[key] = {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
    for out, value in results["cpu"].items():
        np.testing.assert_allclose(results["docs"][out], value, rtol=RTOL, atol=ATOL, err_msg=out)

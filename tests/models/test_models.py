"""End to end: real files from MNN's converter against outputs recorded from MNN's own runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy.models import DEFAULT_INPUTS, DEFAULT_MODEL
from tests.helpers import ATOL, RTOL

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(p.stem for p in DATA.glob("*.mnn"))


def load_case(name: str) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(DATA / f"{name}.npz") as z:
        inputs = {k[6:]: z[k] for k in z.files if k.startswith("input:")}
        outputs = {k[7:]: z[k] for k in z.files if k.startswith("output:")}
    return DATA / f"{name}.mnn", inputs, outputs


def run_model(path, inputs, num_thread=1):
    interp = mnnpy.Interpreter(path)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=num_thread))
    for name, value in inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    interp.run_session(session)
    return {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}


def test_all_models_present():
    assert {"conv_relu_pool_fc", "residual_add", "nhwc_input", "batch2"} <= set(MODELS)


@pytest.mark.parametrize("num_thread", [1, 2])
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_mnn(name, num_thread):
    path, inputs, expected = load_case(name)
    got = run_model(path, inputs, num_thread)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key].shape == value.shape, key
        np.testing.assert_allclose(got[key], value, rtol=RTOL, atol=ATOL, err_msg=f"{name}:{key}")


@pytest.mark.parametrize("name", MODELS)
def test_threads_give_identical_results_and_runs_repeat(name):
    path, inputs, _ = load_case(name)
    interp = mnnpy.Interpreter(path)
    results = []
    for threads in (1, 2):
        session = interp.create_session(mnnpy.ScheduleConfig(num_thread=threads))
        for n, v in inputs.items():
            interp.get_session_input(session, n).copy_from(v)
        for _ in range(2):  # the input must survive a run: run again without feeding
            interp.run_session(session)
            results.append(
                {n: t.numpy() for n, t in interp.get_session_output_all(session).items()}
            )
    for other in results[1:]:
        for key in results[0]:
            np.testing.assert_array_equal(other[key], results[0][key])


def test_issue_example_api_and_resize_to_batch():
    """The README's Python example, then a resize to batch 3 that re-plans memory."""
    path, inputs, expected = load_case("conv_relu_pool_fc")
    img = inputs["x"]
    net = mnnpy.Interpreter(str(path))
    session = net.create_session(mnnpy.ScheduleConfig(num_thread=2))
    x = net.get_session_input(session)
    net.resize_tensor(x, (1, 3, 32, 32))
    net.resize_session(session)
    x.copy_from_host_tensor(mnnpy.Tensor.from_numpy(img))
    net.run_session(session)
    y = net.get_session_output(session).numpy()
    np.testing.assert_allclose(y, expected["prob"], rtol=RTOL, atol=ATOL)

    batch = np.concatenate([img, img * 0.5, img[:, ::-1].copy()], axis=0)
    net.resize_tensor(x, batch.shape)
    with pytest.raises(mnnpy.MNNError):  # memory is gone until the session is resized
        x.copy_from(batch)
    net.resize_session(session)
    x.copy_from(batch)
    net.run_session(session)
    yb = net.get_session_output(session).numpy()
    assert yb.shape == (3, 10)
    for i in range(3):
        single = run_model(path, {"x": batch[i : i + 1]})["prob"]
        np.testing.assert_allclose(yb[i : i + 1], single, rtol=RTOL, atol=ATOL)


def test_nhwc_dformat_input_is_tensorflow_typed():
    path, inputs, expected = load_case("nhwc_dformat")
    interp = mnnpy.Interpreter(path)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    x = interp.get_session_input(session)
    assert x.dimension_type == mnnpy.DimensionType.TENSORFLOW
    host = mnnpy.Tensor.from_numpy(inputs["x"], mnnpy.DimensionType.TENSORFLOW)
    x.copy_from_host_tensor(host)
    interp.run_session(session)
    out = interp.get_session_output(session)
    np.testing.assert_allclose(out.numpy(), expected["y"], rtol=RTOL, atol=ATOL)


def test_bundled_model_is_the_default_and_matches_its_golden():
    with np.load(DEFAULT_INPUTS) as z:
        got = run_model(DEFAULT_MODEL, {"x": z["input:x"]})
        np.testing.assert_allclose(got["prob"], z["output:prob"], rtol=RTOL, atol=ATOL)


def test_run_without_resize_after_resize_tensor_is_an_error():
    path, inputs, _ = load_case("conv_relu_pool_fc")
    interp = mnnpy.Interpreter(path)
    session = interp.create_session()
    interp.resize_tensor(interp.get_session_input(session), (2, 3, 32, 32))
    with pytest.raises(mnnpy.MNNError) as e:
        interp.run_session(session)
    assert e.value.code == mnnpy.ErrorCode.NO_EXECUTION

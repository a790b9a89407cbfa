"""mnnpy.ray: batch inference on Ray Data, checked row by row against a plain Session loop.

Tests that need Ray start one local instance on loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
makes Ray use 127.0.0.1; usage stats are off) and are skipped when the ``ray`` extra is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mnnpy

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "data" / "conv_relu_pool_fc.mnn"
NO_RAY = 'the optional extra is not installed: pip install "mnnpy-runtime[ray]"'
LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _reference(rows: np.ndarray) -> np.ndarray:
    """Outputs of a plain single-process Session, one row per run."""
    interp = mnnpy.Interpreter(MODEL)
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    x = interp.get_session_input(session)
    out = []
    for row in rows:
        x.copy_from(row[None])
        interp.run_session(session)
        out.append(interp.get_session_output(session, "prob").numpy()[0])
    return np.stack(out)


def _probs(table: Any) -> np.ndarray:
    from mnnpy.ray import rows_numpy

    return rows_numpy(table.column("output:prob"), (10,))


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- without Ray ----------------------------------------------------------------------------------
def test_import_mnnpy_never_imports_ray() -> None:
    code = (
        "import mnnpy, sys; assert 'ray' not in sys.modules\n"
        "import mnnpy.ray; assert 'ray' not in sys.modules and 'pyarrow' not in sys.modules"
    )
    result = _run_python(code)
    assert result.returncode == 0, result.stderr


def test_missing_ray_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import mnnpy.ray\n"
        "try:\n    mnnpy.ray.map_batches(None, b'')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert "mnnpy-runtime[ray]" in result.stdout


@pytest.fixture(scope="module")
def pa() -> Any:
    return pytest.importorskip("pyarrow", reason=NO_RAY)


def test_predictor_rows_and_errors(pa: Any) -> None:
    from mnnpy.ray import MNNPredictor

    rng = np.random.default_rng(1)
    x = rng.random((40, 3, 32, 32), dtype=np.float32)
    column = np.empty(43, dtype=object)
    column[:40] = list(x)
    column[40] = x[0][:, :, :31]  # wrong shape
    column[41] = np.array(["not", "an", "image"])  # wrong dtype
    column[42] = None
    predictor = MNNPredictor(MODEL, input_column="x", keep_columns=False)
    table = predictor({"x": column})
    assert table.column_names == ["output:prob", "error"]
    errors = table.column("error").to_pylist()
    assert errors[:40] == [None] * 40
    assert "shape (3, 32, 32)" in errors[40] and "(3, 32, 31)" in errors[40]
    assert "float32" in errors[41] and "<U5" in errors[41]
    assert "null" in errors[42]
    probs = _probs(table)
    np.testing.assert_allclose(probs[:40], _reference(x), rtol=1e-5, atol=1e-6)
    assert np.isnan(probs[40:]).all()
    assert table.column("output:prob").null_count == 3


def test_fixed_batch_pads_and_no_pad_resizes(pa: Any) -> None:
    from mnnpy.ray import MNNPredictor

    x = np.random.default_rng(2).random((10, 3, 32, 32), dtype=np.float32)
    want = _reference(x)
    fixed = MNNPredictor(MODEL, input_column="x", model_batch=4, keep_columns=False)
    np.testing.assert_allclose(_probs(fixed({"x": x})), want, rtol=1e-5, atol=1e-6)
    assert fixed.fixed_batch == 4 and fixed.stats["padded_rows"] == 2  # 4 + 4 + (2 + 2 zeros)
    exact = MNNPredictor(MODEL, input_column="x", pad=False, keep_columns=False)
    for part in (x[:7], x[7:]):
        np.testing.assert_allclose(_probs(exact({"x": part})), _reference(part), atol=1e-6)
    assert exact.fixed_batch is None and exact.stats["padded_rows"] == 0
    assert exact.stats["resizes"] == 3  # the probe at 2, then 7, then 3


def test_memory_budget_runs_in_parts(pa: Any) -> None:
    from mnnpy.ray import MNNPredictor

    x = np.random.default_rng(3).random((32, 3, 32, 32), dtype=np.float32)
    predictor = MNNPredictor(
        MODEL.read_bytes(),
        input_column="x",
        memory="limit",
        memory_budget=600_000,
        keep_columns=False,
    )
    assert predictor.session.config.backend_config.memory == mnnpy.MemoryMode.LOW
    table = predictor({"x": x})
    assert table.column("error").null_count == 32
    np.testing.assert_allclose(_probs(table), _reference(x), rtol=1e-5, atol=1e-6)
    assert predictor._max_rows is not None and predictor._max_rows < 32


# -- with Ray ----------------------------------------------------------------------------------
@pytest.fixture
def local_env(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.data", reason=NO_RAY)
    for key, value in LOCAL_ENV.items():
        monkeypatch.setenv(key, value)


def test_cli_batch_directory(local_env: None, tmp_path: Path, pa: Any) -> None:
    """Runs first, before this module's Ray instance exists: the CLI starts and stops its own."""
    import pyarrow.parquet as pq

    src = tmp_path / "in"
    src.mkdir()
    x = np.random.default_rng(4).random((12, 3, 32, 32), dtype=np.float32)
    for i, row in enumerate(x):
        np.save(src / f"{i:02d}.npy", row)
    np.save(src / "bad_shape.npy", x[0][:, :, :31])
    np.save(src / "bad_dtype.npy", x[0].astype(np.complex64))
    (src / "corrupt.png").write_bytes(b"not a png")
    (src / "notes.txt").write_text("not an input: skipped by extension")
    out = tmp_path / "scores"
    args = [str(MODEL), str(src), "--out", str(out), "--workers", "1", "--no-progress"]
    result = subprocess.run(
        [sys.executable, "-m", "mnnpy", "batch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "15 rows in" in result.stdout and "3 failed" in result.stdout
    table = pq.read_table(out)
    names = [Path(p).name for p in table.column("path").to_pylist()]
    by_name = dict(zip(names, range(len(names)), strict=True))
    errors = table.column("error").to_pylist()
    probs = _probs(table)
    got = np.stack([probs[by_name[f"{i:02d}.npy"]] for i in range(12)])
    np.testing.assert_allclose(got, _reference(x), rtol=1e-5, atol=1e-6)
    assert "(3, 32, 31)" in errors[by_name["bad_shape.npy"]]
    assert "complex64" in errors[by_name["bad_dtype.npy"]]
    assert errors[by_name["corrupt.png"]].startswith("preprocess failed")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason=NO_RAY)
    pytest.importorskip("ray.data", reason=NO_RAY)
    saved = {k: os.environ.get(k) for k in LOCAL_ENV}
    os.environ.update(LOCAL_ENV)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _collect(ray: Any, ds: Any, key: str = "id") -> Any:
    import pyarrow

    return pyarrow.concat_tables(ray.get(ds.to_arrow_refs())).sort_by(key)


def test_map_batches_matches_session(ray_local: Any, pa: Any) -> None:
    import mnnpy.ray as mray

    rng = np.random.default_rng(5)
    rows, shapes = [], []
    for i in range(300):
        shape = (32, 31, 3) if i % 50 == 7 else (32, 32, 4) if i % 50 == 9 else (32, 32, 3)
        shapes.append(shape)
        rows.append({"id": i, "image": rng.integers(0, 256, shape, dtype=np.uint8)})
    prep = mray.ImagePreprocess(norm=(1 / 255,))
    # Two actors of half a CPU each leave a CPU of the two for Ray Data's read tasks.
    out = mray.map_batches(
        ray_local.data.from_items(rows),
        str(MODEL),
        input_column="image",
        preprocess=prep,
        batch_size=32,
        concurrency=2,
        num_cpus=0.5,
        keep_columns=["id"],
    )
    table = _collect(ray_local, out)
    assert table.column("id").to_pylist() == list(range(300))  # nothing dropped
    good = [i for i, s in enumerate(shapes) if s == (32, 32, 3)]
    want = _reference(np.stack([prep(rows[i]["image"]) for i in good]))
    probs = _probs(table)
    np.testing.assert_allclose(probs[good], want, rtol=1e-5, atol=1e-6)
    errors = table.column("error").to_pylist()
    for i, shape in enumerate(shapes):
        if shape == (32, 31, 3):
            assert errors[i].startswith("bad input") and "(3, 32, 31)" in errors[i]
        elif shape == (32, 32, 4):
            assert errors[i].startswith("preprocess failed") and "HxWx3" in errors[i]
        else:
            assert errors[i] is None
    summary = mray.summarize(ray_local.data.from_arrow(table))
    assert (summary.rows, summary.failures) == (300, 12)


def test_npy_input_with_budget(ray_local: Any, pa: Any, tmp_path: Path) -> None:
    import mnnpy.ray as mray

    x = np.random.default_rng(6).random((50, 3, 32, 32), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    ds, column, keep, prep = mray.read_input(str(tmp_path / "x.npy"), MODEL.read_bytes())
    assert (column, keep, prep) == ("data", ["index"], None)
    out = mray.map_batches(
        ds,
        MODEL.read_bytes(),
        input_column=column,
        batch_size=16,
        concurrency=1,
        memory="limit",
        memory_budget=600_000,
        keep_columns=keep,
    )
    table = _collect(ray_local, out, "index")
    assert table.column("index").to_pylist() == list(range(50))
    assert table.column("error").null_count == 50
    np.testing.assert_allclose(_probs(table), _reference(x), rtol=1e-5, atol=1e-6)


def test_plain_dataset_map_batches(ray_local: Any, pa: Any) -> None:
    """The class works with Ray's own map_batches and its default (NumPy) batch format."""
    from mnnpy.ray import MNNPredictor

    x = np.random.default_rng(7).random((40, 3, 32, 32), dtype=np.float32)
    ds = ray_local.data.from_items([{"id": i, "x": row} for i, row in enumerate(x)])
    out = ds.map_batches(
        MNNPredictor,
        fn_constructor_kwargs={"model": ray_local.put(MODEL.read_bytes()), "input_column": "x"},
        compute=ray_local.data.ActorPoolStrategy(size=1),
        batch_size=16,
        num_cpus=1,
    )
    table = _collect(ray_local, out)
    assert table.column_names == ["id", "x", "output:prob", "error"]
    np.testing.assert_allclose(_probs(table), _reference(x), rtol=1e-5, atol=1e-6)

"""The geometry stage's C twins (``_describe.describe`` and the loops under it) vs the Python ones
on every unit of real converter output: the benchmark models (generated and cached, not
committed; skipped without onnx)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import mnnpy
from mnnpy.geometry import compose as CO
from mnnpy.geometry import computers as GC
from mnnpy.geometry import fuse as F
from tests.unit.test_describe_c import _decisions, _raster_plans
from tests.unit.test_geometry import replan

pytest.importorskip("mnnpy.geometry._describe")
ROOT = Path(__file__).resolve().parents[2]
# the models whose creation the geometry stage weighs on most, and one of each other kind
NAMES = ["shufflenet_v2", "audio_encoder", "llama_decoder", "transformer", "mobilenet_v2"]


@pytest.fixture(scope="module")
def models() -> dict[str, Path]:
    pytest.importorskip("onnx", reason="the benchmark models are built with onnx.helper")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_bench_models import ensure_models
    finally:
        sys.path.pop(0)
    return ensure_models(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_models_decide_the_same(models, name, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    session = mnnpy.Interpreter(models[name]).create_session(mnnpy.ScheduleConfig(num_thread=1))

    def plan() -> tuple[list, list]:
        pipeline, geometry, _ = replan(session)
        uses = [t.describe.use_count for u in pipeline.units for t in u.inputs + u.outputs]
        return _decisions(pipeline, geometry), uses

    fast = plan()
    assert any(d[1] is not None for d in fast[0])  # some units are described as regions
    monkeypatch.setattr(F, "_fast", None)
    monkeypatch.setattr(CO, "_pieces_c", None)
    monkeypatch.setattr(GC, "_fast", None)
    assert plan() == fast


@pytest.mark.parametrize("name", NAMES)
def test_models_raster_plans_match_python(models, name, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The raster executions' on_resize and idle in C (``_describe.resize`` / ``idle``) plan
    every raster of the model as their Python lines do."""
    from mnnpy.backend.cpu.executions import raster

    def plans() -> list:
        interp = mnnpy.Interpreter(models[name])
        return _raster_plans(interp.create_session(mnnpy.ScheduleConfig(num_thread=1)))

    fast = plans()
    assert fast and any(r[3] for r in fast)  # rasters that copy
    monkeypatch.setattr(raster, "_C", None)
    assert plans() == fast

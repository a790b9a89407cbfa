"""What a resize decides is read-only: the unit plans and run steps, the memory plan, the
placements and the int8 plan cannot be changed after the fact (a new resize makes new ones)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import mnnpy
from mnnpy.memory import MemoryPlanner

DATA = Path(__file__).resolve().parents[1] / "data"


def test_unit_plans_run_steps_and_placements_are_frozen() -> None:
    interp = mnnpy.Interpreter(DATA / "batch2.mnn")
    session = interp.create_session(mnnpy.ScheduleConfig(num_thread=1))
    pipeline = session.pipelines[0]
    plan = next(u.plan for u in pipeline.units if u.plan is not None and u.plan.execution)
    step = pipeline._steps[0]
    assert isinstance(plan.inputs, tuple) and isinstance(plan.copies, tuple)
    assert isinstance(step.inputs, tuple) and isinstance(step.outputs, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.execution = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.call = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.placement()[0].backend = "x"  # type: ignore[misc]


def test_memory_plan_is_frozen() -> None:
    planner = MemoryPlanner(64)
    planner.acquire("a", 100)
    planner.release("a")
    plan = planner.compute()
    assert plan.offsets["a"] == 0 and plan.sizes["a"] == 128 and len(plan.blocks) == 1
    with pytest.raises(TypeError):
        plan.offsets["b"] = 0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.arena_size = 0  # type: ignore[misc]


def test_quant_plan_is_frozen() -> None:
    interp = mnnpy.Interpreter(DATA / "int8" / "cnn_int8.mnn")
    quant = interp.create_session(mnnpy.ScheduleConfig()).schedule_info.quant
    assert quant is not None and isinstance(quant.ops, tuple) and isinstance(quant.int8, frozenset)
    with pytest.raises(TypeError):
        quant.attrs[0] = None  # type: ignore[index]

"""tools/create_phases.py: phase timings of a first and second creation in fresh processes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "data" / "conv_relu_pool_fc.mnn"


@pytest.fixture(scope="module")
def phases():  # the tool is a script in tools/, imported as a module here
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        yield importlib.import_module("create_phases")
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_every_phase_names_a_function(phases) -> None:
    """A renamed function would silently drop out of the table: each wrapped one must exist."""
    for module, attr, _ in phases.PHASES:
        owner = importlib.import_module(module)
        for part in attr.split("."):
            owner = getattr(owner, part)
        assert callable(owner), (module, attr)


def test_two_creations_per_process_with_nested_phases(phases) -> None:
    runs = phases.measure(MODEL, 1)
    assert len(runs) == 1 and len(runs[0]) == 2  # one process, its first and second creation
    for r in runs[0]:
        assert r["total"] >= r["create_session"] > 0
        assert r["create_session"] >= r["optimize_units"] >= r["  _place_all"] > 0
        assert r["  _place_all"] >= r["    place (on_create)"] > 0
    # plugins load on a forward type's first use: a CPU session does not scan for them
    assert not any(label.startswith("plugin discovery") for r in runs[0] for label in r)
    text = phases.table(MODEL, runs)
    assert text.splitlines()[0].startswith("conv_relu_pool_fc (1 fresh processes")
    assert any(line.split()[0] == "plan_geometry" for line in text.splitlines()[2:])

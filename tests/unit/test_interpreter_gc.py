"""The cyclic collector around model loading and session planning (``interpreter._gc_paused``)."""

from __future__ import annotations

import gc
from pathlib import Path

import mnnpy
from mnnpy.interpreter import _gc_paused

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def test_the_collector_is_back_on_and_the_new_objects_are_in_the_oldest_generation():
    assert gc.isenabled()
    with _gc_paused():
        assert not gc.isenabled()
        made = [[] for _ in range(50)]  # tracked objects, made while paused
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in made)  # no pass over them was needed to get there


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with _gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_objects_the_program_froze_stay_frozen():
    kept = [[]]  # frozen by the program: in no generation the collector visits
    gc.freeze()
    try:
        it = mnnpy.Interpreter(DATA / "conv_relu_pool_fc.mnn")
        it.create_session()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert all(o is not kept for o in gc.get_objects())  # not thawed
    finally:
        gc.unfreeze()

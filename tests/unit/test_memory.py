"""MemoryPlanner: offsets never overlap for buffers alive together; reuse after release."""

from __future__ import annotations

import numpy as np

from mnnpy.memory import MemoryPlanner, align


def _check_no_overlap(planner_events, plan):
    alive, intervals = {}, {}
    t = 0
    for kind, key, *_ in planner_events:
        if kind == "a":
            alive[key] = t
        else:
            intervals[key] = (alive.pop(key), t)
        t += 1
    for key, start in alive.items():
        intervals[key] = (start, float("inf"))
    keys = list(intervals)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            (s1, e1), (s2, e2) = intervals[a], intervals[b]
            if s1 < e2 and s2 < e1:
                lo1, hi1 = plan.offsets[a], plan.offsets[a] + plan.sizes[a]
                lo2, hi2 = plan.offsets[b], plan.offsets[b] + plan.sizes[b]
                assert hi1 <= lo2 or hi2 <= lo1, (a, b)


def _replay(events, alignment=64):
    planner = MemoryPlanner(alignment)
    for kind, key, *size in events:
        if kind == "a":
            planner.acquire(key, size[0])
        else:
            planner.release(key)
    return planner.compute()


def test_released_bytes_are_reused():
    events = [("a", "x", 1000), ("a", "y", 1000), ("r", "x"), ("a", "z", 1000)]
    plan = _replay(events)
    assert plan.offsets["z"] == plan.offsets["x"]
    assert plan.arena_size == 2 * align(1000, 64) == plan.lower_bound


def test_never_released_buffers_do_not_share():
    plan = _replay([("a", "x", 64), ("a", "y", 64)])
    assert plan.offsets["x"] != plan.offsets["y"]


def test_alignment_and_lower_bound():
    plan = _replay([("a", 1, 10), ("a", 2, 100), ("r", 1), ("r", 2), ("a", 3, 5)], alignment=32)
    assert all(off % 32 == 0 for off in plan.offsets.values())
    assert plan.lower_bound == 32 + 128


def test_random_lifetimes_never_overlap_and_stay_near_the_bound():
    rng = np.random.default_rng(0)
    for _ in range(50):
        events, alive, n = [], [], 0
        for _ in range(60):
            if alive and rng.random() < 0.45:
                key = alive.pop(rng.integers(len(alive)))
                events.append(("r", key))
            else:
                events.append(("a", n, int(rng.integers(1, 5000))))
                alive.append(n)
                n += 1
        plan = _replay(events)
        _check_no_overlap(events, plan)
        assert plan.lower_bound <= plan.arena_size <= 2 * plan.lower_bound


def test_sub_tensor_views_keep_the_block_and_block_in_place_takeover() -> None:
    """``view``: a sub-tensor is a range of a live buffer (Arm NN's sub-tensor handles)."""
    p = MemoryPlanner(alignment=64)
    p.acquire("parent", 1024, op=0)
    assert p.view("lo", "parent", 0, 512, op=1) and p.view("hi", "parent", 512, 512, op=1)
    assert not p.view("odd", "parent", 100, 64)  # not aligned
    assert not p.view("past", "parent", 960, 128)  # not inside
    p.release("parent", op=1)  # the parent dies at the Slice, its parts live on
    assert not p.alias("inplace", "parent", op=2)  # nothing takes the bytes over meanwhile
    p.acquire("other", 1024, op=2)  # cannot reuse the parent's bytes: "hi" is alive
    p.release("lo", op=2)
    p.release("hi", op=3)
    p.acquire("later", 1024, op=4)  # now it can
    plan = p.compute()
    assert plan.offsets["lo"] == plan.offsets["parent"]
    assert plan.offsets["hi"] == plan.offsets["parent"] + 512 and plan.sizes["hi"] == 512
    assert plan.offsets["other"] != plan.offsets["parent"]
    assert plan.offsets["later"] in (plan.offsets["parent"], plan.offsets["other"])
    assert plan.arena_size == 2048

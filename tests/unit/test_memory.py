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


def test_an_order_that_misses_the_bound_is_improved_and_the_plan_is_repeatable():
    # The lifetimes of a small CNN's activations (conv split into two GEMM halves, scratch):
    # largest-first greedy placement needs 25600 bytes here, the bound is 22400.
    blocks = {  # key: (size, acquired at tick, released at tick or None)
        "x": (12800, 0, 2),
        "r5": (6400, 1, 4),
        "r11": (6400, 3, 7),
        "in0": (3200, 5, 11),
        "in1": (3200, 6, 15),
        "out0": (6400, 8, 17),
        "s1": (4608, 9, 10),
        "out1": (6400, 12, 18),
        "s2": (4608, 13, 14),
        "r17": (9600, 16, 20),
        "p19": (2432, 19, 24),
        "c27": (3200, 21, 26),
        "s3": (5632, 22, 23),
        "g29": (128, 25, 28),
        "fc": (128, 27, 30),
        "cv": (128, 29, 32),
        "prob": (128, 31, None),
    }
    ticks = {}
    for key, (size, start, end) in blocks.items():
        ticks[start] = ("a", key, size)
        if end is not None:
            ticks[end] = ("r", key)
    events = [ticks[t] for t in sorted(ticks)]
    plans = [_replay(events) for _ in range(2)]
    _check_no_overlap(events, plans[0])
    assert plans[0].lower_bound == 22400
    assert plans[0].arena_size == 22400  # 25600 with the largest-first order alone
    assert dict(plans[0].offsets) == dict(plans[1].offsets)


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

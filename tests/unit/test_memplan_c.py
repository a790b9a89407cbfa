"""The memory planner's C twin (``mnnpy/_memplan.pyx``) vs ``memory._plan_python``, its reference.

Random block sets (lifetimes short and long, some never released, sizes from one byte to
megabytes, ties in size and start) must get exactly the reference's offsets and arena, with and
without the twin's time-neighbour lists; every plan keeps blocks alive together apart in memory.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from mnnpy import memory as M

C = pytest.importorskip("mnnpy._memplan")


def _blocks(seed: int) -> list[M.Block]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    sizes = [64, 128, 4096, 1 << 20] if rng.random() < 0.3 else None  # many equal sizes
    starts = rng.permutation(3 * n)[:n] if rng.random() < 0.8 else rng.integers(0, n, n)
    blocks = []
    for i in range(n):
        start = int(starts[i])
        life = int(rng.geometric(0.3 if rng.random() < 0.8 else 0.02))
        end = M._NEVER if rng.random() < 0.05 else start + life
        if rng.random() < 0.02:
            end = max(start - int(rng.integers(0, 3)), 0)  # empty lifetimes: alive with nothing
        size = (
            int(rng.choice(sizes)) if sizes else int(rng.integers(0, 1 << int(rng.integers(1, 22))))
        )
        blocks.append(M.Block(i, size, start, end))
    return blocks


def _c(blocks: list[M.Block], lower_bound: int, max_pairs: int) -> tuple[list[int], int]:
    return C.plan(
        [b.start for b in blocks],
        [-1 if b.end == M._NEVER else b.end for b in blocks],
        [b.size for b in blocks],
        lower_bound,
        M._RETRIES,
        max_pairs,
    )


def _bound(blocks: list[M.Block]) -> int:
    planner = M.MemoryPlanner(1)
    planner._blocks = {b.key: b for b in blocks}
    return planner._lower_bound()[0]


def _check_apart(blocks: list[M.Block], offsets: list[int]) -> None:
    for i, a in enumerate(blocks):
        for j in range(i):
            b = blocks[j]
            if a.start < b.end and b.start < a.end:
                lo1, lo2 = offsets[i], offsets[j]
                assert lo1 + a.size <= lo2 or lo2 + b.size <= lo1, (a, b)


@pytest.mark.parametrize("chunk", range(20))
def test_plan_matches_python(chunk: int) -> None:
    for seed in range(chunk * 150, (chunk + 1) * 150):
        blocks = _blocks(seed)
        bound = _bound(blocks)
        if seed % 3 == 0:
            bound = int(bound * random.Random(seed).uniform(1.0, 1.3))  # stop retries early
        arena = M._plan_python(blocks, bound)
        want = [b.offset for b in blocks]
        _check_apart(blocks, want)
        assert max((o + b.size for o, b in zip(want, blocks, strict=True)), default=0) == arena
        for max_pairs in (1 << 20, 0):  # time-neighbour lists, and placing against all
            assert _c(blocks, bound, max_pairs) == (want, arena), (seed, max_pairs)


@pytest.mark.parametrize("seed", [*range(M._RETRIES), 255, 65536])
def test_jitter_is_pythons_random_draw_for_draw(seed: int) -> None:
    draws = random.Random(seed)
    assert C.jitter(seed, 1500) == [draws.uniform(0.5, 1.5) for _ in range(1500)]


def test_jittered_orders_are_pythons_mersenne_twister() -> None:
    """Plans a retry improved: only the same draws as ``random.Random(seed)`` give them."""
    improved = 0
    for seed in range(1000):
        blocks = _blocks(seed)
        bound = _bound(blocks)
        first, first_arena = C.plan(
            [b.start for b in blocks],
            [-1 if b.end == M._NEVER else b.end for b in blocks],
            [b.size for b in blocks],
            bound,
            0,
        )
        arena = M._plan_python(blocks, bound)
        if arena < first_arena:
            improved += 1
            assert _c(blocks, bound, 1 << 20) == ([b.offset for b in blocks], arena)
    assert improved >= 40  # the retries and their jitter are exercised


@pytest.mark.parametrize("seed", range(4))
def test_planner_uses_the_twin_and_falls_back(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole plans (in-place takeovers and sub-tensors too) with the twin and without it."""
    rng = np.random.default_rng(seed)
    planner = M.MemoryPlanner(64)
    alive: list[int] = []
    for i in range([200, 400, 1030, 1100][seed]):  # the last two: over _RETRY_BLOCKS
        roll = rng.random()
        if alive and roll < 0.4:
            planner.release(alive.pop(int(rng.integers(len(alive)))), op=i)
        elif alive and roll < 0.45 and planner.alias(i, alive[-1], op=i):
            alive[-1] = i  # in place: the new key holds the buffer now
        elif alive and roll < 0.5 and planner.view(i, alive[-1], 0, 64, op=i):
            alive.append(i)
        else:
            planner.acquire(i, int(rng.integers(1, 50000)), op=i)
            alive.append(i)
    with_c = planner.compute()
    placed = [b.offset for b in with_c.blocks]  # the blocks are the planner's: planned again
    monkeypatch.setattr(M, "_plan_c", None)
    python = planner.compute()
    assert dict(with_c.offsets) == dict(python.offsets) and len(python.offsets) > 100
    assert dict(with_c.sizes) == dict(python.sizes)
    assert with_c.arena_size == python.arena_size >= python.lower_bound
    assert placed == [b.offset for b in python.blocks]


def test_what_the_twin_declines_is_planned_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    planner = M.MemoryPlanner(64)
    for i in range(40):
        planner.acquire(i, 1000 * (i % 7 + 1))
        if i % 3:
            planner.release(i)
    want = planner.compute()

    def declines(*args: object) -> None:
        raise ValueError("declined")

    monkeypatch.setattr(M, "_plan_c", declines)
    got = planner.compute()
    assert dict(got.offsets) == dict(want.offsets) and got.arena_size == want.arena_size


@pytest.mark.parametrize(
    "args",
    [
        ([0, 1], [2], [64, 64], 0, 16),  # lengths differ
        ([0], [2], [-64], 0, 16),  # negative size
        ([-1], [2], [64], 0, 16),  # negative start
        ([0], [-2], [64], 0, 16),  # end below -1
        ([0], [2], [1 << 60], 0, 16),  # beyond exact doubles
        ([0], [2], [1 << 52], 0, 16),
        ([0] * 1025, [2] * 1025, [(1 << 52) - 1] * 1025, 0, 16),  # the total beyond 2**62
        ([0], [2], [64], 0, -1),  # retries out of range
        ([0], [2], [64], 0, 1 << 20),
    ],
)
def test_plan_rejects_bad_input(args: tuple) -> None:
    with pytest.raises(ValueError):
        C.plan(*args)


def test_plan_rejects_what_is_not_an_integer() -> None:
    with pytest.raises(TypeError):
        C.plan([0], [2.5], [64], 0, 16)
    with pytest.raises(OverflowError):
        C.plan([0], [2], [1 << 70], 0, 16)

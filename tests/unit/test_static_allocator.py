"""StaticAllocator: STATIC weights carved from big chunks (MNN's static BufferAllocator)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

from mnnpy import net_lean
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.static_allocator import (
    CHUNK_BYTES,
    FIRST_BYTES,
    RESERVE_AFTER,
    StaticAllocator,
)
from mnnpy.config import BackendConfig, MemoryMode
from mnnpy.net_lean import read_model


def _free_ranges(a: StaticAllocator) -> list[list[tuple[int, int]]]:
    return [list(c.free) for c in a.chunks]


def test_pieces_are_aligned_zeroed_and_disjoint() -> None:
    a = StaticAllocator(64, chunk_bytes=4096)
    views = [a.alloc(n, "t")[0] for n in (1, 100, 64, 1000)]
    spans = sorted((v.ctypes.data, v.ctypes.data + v.size) for v in views)
    assert all(v.ctypes.data % 64 == 0 and not v.any() for v in views)
    assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:], strict=False))
    assert len(a.chunks) == 1


def test_freed_piece_is_reused_zeroed_and_ranges_merge() -> None:
    a = StaticAllocator(64, chunk_bytes=1024)
    v1, p1 = a.alloc(128, "a")
    v2, p2 = a.alloc(128, "b")
    _, p3 = a.alloc(128, "c")
    v1.fill(7)
    v2.fill(9)
    a.free(p1)
    a.free(p2)
    assert _free_ranges(a) == [[(0, 256), (384, 640)]]  # p1 and p2 merged
    v4, p4 = a.alloc(200, "d")  # best fit: the 256-byte hole, zeroed again
    assert p4.offset == 0 and not v4.any()
    a.free(p4)
    a.free(p3)
    assert a.chunks == []  # all free: the chunk goes
    a.free(p3)  # a second free of one piece does nothing
    assert a.chunks == []


def test_large_request_gets_its_own_chunk() -> None:
    a = StaticAllocator(64, chunk_bytes=1024)
    v, p = a.alloc(5000, "big")
    assert v.size == 5000 and p.chunk.memory.size == 5056 and p.chunk.free == []
    _, q = a.alloc(10, "small")
    assert q.chunk is not p.chunk and a.held_bytes == 5056 + 1024


def test_a_small_first_chunk_then_big_ones() -> None:
    a = StaticAllocator(64)
    sizes = []
    for _ in range(40):
        _, p = a.alloc(1000 << 10, "w")  # 1000 KiB pieces
        if p.chunk.memory.size not in sizes:
            sizes.append(p.chunk.memory.size)
    assert sizes == [FIRST_BYTES, CHUNK_BYTES]  # a small model's weights fit the first


def test_free_inside_alloc_is_queued_then_done() -> None:
    a = StaticAllocator(64, chunk_bytes=1024)
    _, p = a.alloc(64, "a")
    with a._lock:  # as a finalizer running while alloc holds the lock
        a.free(p)
        assert a._pending == [p] and a.chunks
    a.alloc(64, "b")  # drains the queue when it lets the lock go
    assert a._pending == [] and p.freed


@pytest.mark.parametrize("memory", [MemoryMode.NORMAL, MemoryMode.LOW])
def test_weights_count_and_free_in_every_mode(memory: MemoryMode) -> None:
    backend = CPUBackend(1, BackendConfig(memory=memory))
    pooled = memory == MemoryMode.NORMAL
    assert (backend._statics is not None) == pooled

    class Owner:
        pass

    owners = [Owner() for _ in range(3)]
    arrays = [backend.static_empty(1000 * (i + 1), np.float32, o) for i, o in enumerate(owners)]
    assert backend.static_bytes == 4000 * 6
    assert all(x.dtype == np.float32 and not x.any() for x in arrays)
    del arrays
    owners.clear()
    gc.collect()
    assert backend.static_bytes == 0
    if pooled:
        assert backend._statics is not None and backend._statics.chunks == []
        assert backend._small_statics is not None and backend._small_statics.chunks == []


@pytest.mark.parametrize("memory", [MemoryMode.NORMAL, MemoryMode.LOW])
def test_static_empties_share_one_piece(memory: MemoryMode) -> None:
    backend = CPUBackend(1, BackendConfig(memory=memory))

    class Owner:
        pass

    owner = Owner()
    w, b, h = backend.static_empties(((37, np.float32), (5, np.float32), (3, np.float16)), owner)
    assert (w.size, w.dtype, b.size, b.dtype, h.size, h.dtype) == (
        37, np.float32, 5, np.float32, 3, np.float16
    )  # fmt: skip
    assert backend.static_bytes == 37 * 4 + 5 * 4 + 3 * 2  # as three static_empty calls count
    assert all(x.ctypes.data % 64 == 0 and not x.any() for x in (w, b, h))
    spans = sorted((x.ctypes.data, x.ctypes.data + x.nbytes) for x in (w, b, h))
    assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:], strict=False))
    if memory == MemoryMode.NORMAL:  # one piece of one small-page chunk
        assert backend._small_statics is not None and len(backend._small_statics.chunks) == 1
        assert spans[-1][0] - spans[0][0] == 192 + 64  # 148 bytes padded to 192, then 20 to 64
    w[:], b[:], h[:] = 1, 2, 3
    del owner, w, b, h
    gc.collect()
    assert backend.static_bytes == 0


def test_small_pieces_the_caller_writes_stay_out_of_huge_page_chunks() -> None:
    """static_empties up to SMALL_PIECE bytes: chunks under NumPy's 4 MiB huge-page advice;
    bigger ones, and static_floats (the panels the helper thread writes), the big chunks."""
    from mnnpy.backend.cpu import backend as B

    backend = CPUBackend(1, BackendConfig())
    backend.static_reserve(np.frombuffer(bytes(CHUNK_BYTES), np.uint8)[:64].view(np.float32))

    class Owner:
        pass

    owners = [Owner() for _ in range(4)]
    norm = backend.static_empties(((256, np.float32), (256, np.float32)), owners[0])
    big = backend.static_empty(B.SMALL_PIECE // 4 + 1, np.float32, owners[1])
    panels = backend.static_floats((16, 16), owners[2])
    small, large = backend._small_statics, backend._statics
    assert small is not None and large is not None
    assert small.held_bytes < 4 << 20 and all(c.memory.size < 4 << 20 for c in small.chunks)

    def home(a: np.ndarray) -> StaticAllocator:
        at = a.ctypes.data
        found = [s for s in (small, large) for c in s.chunks if
                 c.memory.ctypes.data <= at < c.memory.ctypes.data + c.memory.size]  # fmt: skip
        assert len(found) == 1
        return found[0]

    assert home(norm[0]) is small and home(norm[1]) is small
    assert home(big) is large and home(panels[0]) is large
    assert backend.static_bytes == 2048 + big.nbytes + 128
    del norm, big, panels
    owners.clear()
    gc.collect()
    assert backend.static_bytes == 0 and small.chunks == [] and large.chunks == []


@pytest.mark.parametrize("sizes", [(37, 5), (16 * 9, 16), (0, 3), (1,)])
def test_static_empties_of_floats_are_slices_of_one_view(sizes: tuple[int, ...]) -> None:
    backend = CPUBackend(1, BackendConfig())

    class Owner:
        pass

    owner = Owner()
    arrays = backend.static_empties([(n, np.float32) for n in sizes], owner)
    assert [(x.size, x.dtype) for x in arrays] == [(n, np.float32) for n in sizes]
    assert all(x.ctypes.data % 64 == 0 and not x.any() for x in arrays)
    assert backend.static_bytes == 4 * sum(sizes)
    for i, x in enumerate(arrays):  # writable and disjoint
        x[:] = i + 1
    assert [set(x.tolist()) <= {i + 1} for i, x in enumerate(arrays)] == [True] * len(sizes)
    del owner, arrays, x
    gc.collect()
    assert backend.static_bytes == 0 and backend._owned == {}


def test_read_model_reads_what_f_read_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.bin"
    payload = np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    path.write_bytes(payload)
    with open(path, "rb", buffering=0) as f:
        assert read_model(f) == payload
    real = os.fstat

    class Shorter:  # the file grew after its size was taken: the rest is read after it
        def __init__(self, fd: int) -> None:
            self.st_size = real(fd).st_size - 12345

    monkeypatch.setattr(net_lean.os, "fstat", Shorter)
    with open(path, "rb", buffering=0) as f:
        assert read_model(f) == payload


def test_reserve_sizes_the_first_chunk_once_in_huge_pages() -> None:
    a = StaticAllocator(64)
    a.reserve(CHUNK_BYTES + 100)  # a big model's weights: one first chunk holds them all
    _, p = a.alloc(RESERVE_AFTER + 1, "w")
    assert p.chunk.memory.size == CHUNK_BYTES + (2 << 20)
    assert p.chunk.memory.ctypes.data % (2 << 20) == 0
    a.reserve(CHUNK_BYTES * 4)  # once more than a few bytes are held: no effect
    _, q = a.alloc(p.chunk.memory.size, "w")
    assert q.chunk is not p.chunk and q.chunk.memory.size == p.chunk.memory.size


def test_reserve_of_a_small_model_keeps_the_small_first_chunk() -> None:
    a = StaticAllocator(64)
    a.reserve(CHUNK_BYTES // 2 - 1)
    _, p = a.alloc(1000, "w")
    assert p.chunk.memory.size == FIRST_BYTES


def test_backend_reserves_from_the_buffer_the_weights_view() -> None:
    backend = CPUBackend(1)
    model = np.frombuffer(bytes(CHUNK_BYTES), dtype=np.uint8)  # as a model file's bytes
    backend.static_reserve(np.zeros(4, np.float32))  # views nothing: no hint, asked again
    assert not backend.static_hinted
    backend.static_reserve(model[64:128].view(np.float32))
    owner = type("Owner", (), {})()
    weight, bias = backend.static_floats((16, 4), owner)
    assert not weight.any() and not bias.any() and backend.static_bytes == 80
    statics = backend._statics
    assert statics is not None and statics.held_bytes == CHUNK_BYTES + (2 << 20)
    assert backend.static_hinted
    del owner, weight, bias
    gc.collect()
    assert backend.static_bytes == 0 and statics.held_bytes == 0  # given back


def test_a_refused_reservation_falls_back_to_a_plain_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mnnpy.backend.cpu import static_allocator as sa
    from mnnpy.errors import OutOfMemoryError

    real, asked = sa.allocate_block, []

    def refuse_big(allocator: object, nbytes: int, alignment: int, what: str) -> object:
        asked.append(nbytes)
        if nbytes > CHUNK_BYTES:
            raise OutOfMemoryError(f"refused {nbytes} for {what}")
        return real(allocator, nbytes, alignment, what)

    monkeypatch.setattr(sa, "allocate_block", refuse_big)
    a = StaticAllocator(64)
    a.reserve(sa.RESERVE_MAX * 4)  # capped
    view, p = a.alloc(1000, "w")
    assert asked == [sa.RESERVE_MAX, CHUNK_BYTES] and p.chunk.memory.size == CHUNK_BYTES
    assert view.size == 1000 and not view.any()
    with pytest.raises(OutOfMemoryError, match="refused"):  # a piece bigger than a chunk
        a.alloc(CHUNK_BYTES + 1, "big")


def test_reserve_after_a_few_small_pieces_takes_a_new_chunk() -> None:
    a = StaticAllocator(64)
    small, p = a.alloc(4000, "norm")  # a norm's weights before the first convolution's
    small[:] = 7
    a.reserve(CHUNK_BYTES)
    view, q = a.alloc(100_000, "conv")
    assert q.chunk is not p.chunk and q.chunk.memory.size == CHUNK_BYTES
    assert not view.any() and (small == 7).all()
    _, r = a.alloc(64, "bias")  # the small chunk hands out no more
    assert r.chunk is q.chunk
    a.free(p)
    assert a.chunks == [q.chunk]  # all of the small chunk free: it goes
    a.alloc(RESERVE_AFTER + 64, "more")
    a.reserve(CHUNK_BYTES * 2)  # too many bytes held now: no effect
    assert not a.can_reserve and len(a.chunks) == 1

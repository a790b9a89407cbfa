"""The C twins of the geometry stage's per-unit loops (geometry/_describe.pyx) vs the Python ones.

``within_budget``, ``sources`` and ``through`` (``geometry/fuse.py``), the piece building of
``compose.compose`` and ``CPURaster._plan`` each have a C twin; over random compositions (the
readers and producers of test_compose_c), random region budgets and whole shuffle networks both
must answer the same pieces, rows and decisions, and fail the same way on what they cannot read.
"""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy.backend.cpu.executions.raster import CPURaster
from mnnpy.geometry import compose as CO
from mnnpy.geometry import computers as GC
from mnnpy.geometry import fuse as F
from mnnpy.geometry import regions as R
from tests.unit.test_compose_c import _case
from tests.unit.test_geometry import NC4HW4, NCHW, replan, session_of

D = pytest.importorskip("mnnpy.geometry._describe")


def _plain(placed: list | None) -> list | None:
    """Placed pieces as comparable values: output index, source, space, both sides' keys."""
    if placed is None:
        return None
    return [(j, p.source, list(p.space), R._key(p.src), R._key(p.dst)) for j, p in placed]


def _outcome(fn, *args):  # type: ignore[no-untyped-def]
    """``fn(*args)``, or the kind of error it raised."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - the kind is compared
        return type(e)


def _placed(seed: int) -> tuple[list, str, list]:
    """A reader's pieces (one reads ``t``, one another tensor) and a writer of ``t``."""
    piece, producer = _case(seed)
    for k, u in enumerate(producer):
        u.source = "ab"[k % 2]  # two writers' sources: the fan-in check sees both
    other = CO.Piece(list(piece.space), "o", piece.src, piece.dst)
    piece.source = "t"
    rng = np.random.default_rng(seed)
    placed = [(0, piece), (int(rng.integers(0, 2)), other)][: int(rng.integers(1, 3))]
    return placed, "t", producer


@pytest.mark.parametrize("seed", range(1500))
def test_through_matches_python(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    placed, t, writer = _placed(seed)
    monkeypatch.setattr(R, "MAX_REGIONS", int(np.random.default_rng(seed).integers(0, 40)))
    before = F.sources(placed)
    assert D.sources(placed) == before and list(D.sources(placed)) == list(before)
    want = _outcome(F.through, placed, t, writer, before)
    got = _outcome(D.through, placed, t, writer, before, CO.compose, R.MAX_REGIONS)
    if isinstance(want, type) or want is None:
        assert got == want
    else:
        assert isinstance(got, tuple)
        assert _plain(got[0]) == _plain(want[0]) and list(got[1].items()) == list(want[1].items())
    for pieces in (placed, want[0] if isinstance(want, tuple) else []):
        fits = _outcome(F.within_budget, pieces)
        assert _outcome(D.within_budget, pieces, R.MAX_REGIONS) == fits


@pytest.mark.parametrize("seed", range(1500))
def test_composed_pieces_match_python(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    piece, producer = _case(seed)
    got = CO.compose(piece, producer)  # the C twin builds them (the answer remembered now)
    monkeypatch.setattr(CO, "_pieces_c", None)
    monkeypatch.setattr(CO, "_compose_fast", None)
    want = CO.compose(piece, producer)
    assert _plain(None if got is None else [(0, p) for p in got]) == _plain(
        None if want is None else [(0, p) for p in want]
    )
    for p, q in zip(got or (), want or (), strict=True):
        assert p.key() == q.key() and p.planned is q.planned  # one description, one plan
        assert p.src is not q.src and p.dst.terms is not q.dst.terms  # sides of their own


def _remembered() -> list:
    """What ``compose``'s memo holds, as values (the lists rows are planned into: empty)."""
    return [
        (key, None if v is None else [(k, sp, s, d, desc, rows) for k, sp, s, d, desc, rows in v])
        for key, v in CO._memo._table.values()
    ]


@pytest.mark.parametrize("twin", [True, False])
@pytest.mark.parametrize("seed", range(1500))
def test_compose_matches_python(seed: int, twin: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compose`` in C vs its Python lines: the same pieces and the same remembered answer,
    on a miss and on the hit that follows, and the same errors (with ``_compose``'s C twin
    and without it)."""
    piece, producer = _case(seed)
    if not twin:
        monkeypatch.setattr(CO, "_compose_c", None)

    def run() -> tuple:
        CO._memo.clear()
        first = _outcome(CO.compose, piece, producer)
        second = _outcome(CO.compose, piece, producer)
        got = [
            p if p is None or isinstance(p, type) else _plain([(0, q) for q in p])
            for p in (first, second)
        ]
        return got, _remembered()

    fast = run()
    monkeypatch.setattr(CO, "_compose_fast", None)
    assert run() == fast
    CO._memo.clear()


@pytest.mark.parametrize("seed", range(800))
def test_raster_copies_match_python(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    _, producer = _case(seed)
    _, more = _case(seed + 10_000)
    pieces = [(int(rng.integers(0, 2)), p) for p in producer + more]
    for _, p in pieces:
        p.source = "xyz"[int(rng.integers(0, 3))]
    pieces = pieces[: int(rng.integers(1, len(pieces) + 1))]
    monkeypatch.setattr(R, "MAX_REGIONS", int(rng.integers(0, 60)))
    want = _outcome(CPURaster._plan, pieces, [])
    got = _outcome(D.copies, pieces, R.MAX_REGIONS)
    if want is None or isinstance(want, type):
        assert got == want
        return
    assert [(s, j) for s, j, _ in got] == [(s, j) for s, j, _ in want]
    for (_, _, a), (_, _, b) in zip(got, want, strict=True):
        assert np.array_equal(a, b)


def test_malformed_entries_raise() -> None:
    piece, producer = _case(1)
    with pytest.raises(ValueError):
        D.within_budget([(0, piece, 1)], 10)
    with pytest.raises(ValueError):
        D.sources([piece])  # not an (output index, piece) pair
    with pytest.raises(ValueError):
        D.pieces([(0, [1], piece.src, piece.dst)], producer, CO.Piece)  # not a 6-tuple
    with pytest.raises(ValueError):
        D.moved([(0, 0, [1], piece.src, piece.dst, ())], ["x"], CO.Piece)  # not a 7-tuple
    with pytest.raises(TypeError):
        D.moved([(0, 0, [1], piece.src, piece.dst, [], [])], ["x"], CO.Piece)  # not a description
    with pytest.raises(IndexError):
        D.moved([(1, 0, [1], piece.src, piece.dst, (), [])], ["x"], CO.Piece)  # no such input
    with pytest.raises(TypeError):
        D.copies((0, piece), 10)  # not a list


def _decisions(pipeline, geometry) -> list:  # type: ignore[no-untyped-def]
    """Per unit its decisions and its outputs' regions and virtual flags, as values."""
    out = []
    for u in pipeline.units:
        g = geometry.of(u)
        through = None if g is None else [(r.tensor.name, r.index) for r in g.reads_through]
        sources = None if g is None else [s.name for s in g.sources]
        regions = [
            (t.describe.virtual, None if t.describe.regions is None
             else [(p.source.name, p.key()) for p in t.describe.regions])
            for t in u.outputs
        ]  # fmt: skip
        out.append((u.op.name, through, sources, regions))
    return out


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3), (1, 8, 4, 4)])
def test_networks_decide_the_same(
    fmt: object, shape: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, session = session_of(fmt, shape, units=3)  # type: ignore[arg-type]

    def plan() -> tuple[list, list]:
        pipeline, geometry, _ = replan(session)
        uses = [t.describe.use_count for u in pipeline.units for t in u.inputs + u.outputs]
        return _decisions(pipeline, geometry), uses

    fast = plan()
    assert any(d[1] for d in fast[0])  # something is read through
    monkeypatch.setattr(F, "_fast", None)
    monkeypatch.setattr(CO, "_pieces_c", None)
    monkeypatch.setattr(CO, "_compose_fast", None)
    monkeypatch.setattr(GC, "_fast", None)
    assert plan() == fast


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3), (1, 8, 4, 4), (1, 12, 5, 7)])
def test_computers_build_the_same_pieces(
    fmt: object, shape: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The computers' C piece building (``moved``, ``shared``) vs their Python lines."""
    _, session = session_of(fmt, shape, units=3)  # type: ignore[arg-type]
    units = session.pipelines[0].units  # type: ignore[attr-defined]
    kinds = set()

    def pieces() -> list:
        got = []
        for u in units:
            placed = GC.regions_of(u.op, u.inputs, u.outputs)
            if placed is not None:
                kinds.add(u.op.type)
            got.append(None if placed is None else [(j, p, p.key(), p.planned) for j, p in placed])
        return got

    fast = pieces()
    monkeypatch.setattr(GC, "_fast", None)
    slow = pieces()
    assert len(kinds) >= 3  # moves, reshapes and conversions are all compared
    for a, b in zip(fast, slow, strict=True):
        assert (a is None) == (b is None)
        for (j, p, key, planned), (k, q, want, rows) in zip(a or (), b or (), strict=True):
            assert (j, p.source, p.space, key, p.src, p.dst) == (
                k,
                q.source,
                q.space,
                want,
                q.src,
                q.dst,
            )
            assert type(p) is type(q) and p is not q and p.space is not q.space
            assert planned is rows  # the remembered plan shared, as the Python pieces share it


def _raster_plans(session: object) -> list:
    """Every raster execution's plan as values: read through, copies (source, output, rows),
    padding rows, and what ``idle`` decided."""
    out = []
    for p in session.pipelines:  # type: ignore[attr-defined]
        for u in p.units:
            ex = u.execution
            if isinstance(ex, CPURaster):
                copies = [(s.name, j, rows.tolist()) for s, j, rows in ex._copies or ()]
                pads = None if ex._copies is None else [(j, r.tolist()) for j, r in ex._pads]
                idle = (ex._skip, ex._in_place)  # as ``idle`` left them
                out.append((u.op.name, ex.read_through, ex._copies is None, copies, pads, idle))
    return out


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3), (1, 8, 4, 4)])
def test_raster_plans_match_python(
    fmt: object, shape: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnnpy.backend.cpu.executions import raster

    fast = _raster_plans(session_of(fmt, shape, units=3)[1])  # type: ignore[arg-type]
    assert any(r[1] for r in fast) and all(r[3] or r[2] for r in fast)
    monkeypatch.setattr(raster, "_C", None)
    assert _raster_plans(session_of(fmt, shape, units=3)[1]) == fast  # type: ignore[arg-type]


def test_decided_pieces_and_reads() -> None:
    piece, _ = _case(2)

    class _T:  # a tensor's describe with regions, as the stage leaves them
        def __init__(self, regions: tuple | None) -> None:
            self.describe = self
            self.regions = regions

    assert D.decided([_T((piece, piece)), _T((piece,))]) == [(0, piece), (0, piece), (1, piece)]
    assert D.decided([_T((piece,)), _T(None)]) is None
    assert D.decided([]) == []
    assert D.reads_other([(0, piece)], ["y", piece.source]) is False
    assert D.reads_other([(0, piece)], ["y"]) is True


@pytest.mark.parametrize("seed", range(600))
def test_refine_and_merged_match_python(seed: int) -> None:
    """``refine`` and ``merged`` in C vs ``regions``' (reshapes' common refinement and sides)."""
    rng = np.random.default_rng(seed)
    dims = [int(v) for v in rng.integers(0 if seed % 50 == 0 else 1, 7, int(rng.integers(0, 6)))]
    cut = sorted(int(v) for v in rng.integers(0, len(dims) + 1, 2))
    a = dims[: cut[0]] + [int(np.prod(dims[cut[0] : cut[1]]))] + dims[cut[1] :]
    b = [int(v) for v in rng.integers(1, 7, int(rng.integers(0, 5)))] if seed % 3 == 0 else dims
    assert D.refine(a, b) == R.refine(a, b) and D.refine(b, a) == R.refine(b, a)
    space = R.refine(a, b)
    if space is None:
        return
    for shape in (a, b):
        order = list(range(len(shape)))
        if len(order) >= 3 and rng.random() < 0.5:
            order = [0, *order[2:], 1]  # NHWC's flat order
            shape = [shape[k] for k in (0, len(shape) - 1, *range(1, len(shape) - 1))]
        layout = R.Layout(tuple(shape), bool(rng.random() < 0.5))
        want = _outcome(R.merged, layout, order, space)
        got = _outcome(D.merged, layout, order, space, R.Side)
        assert got == want and (isinstance(want, type) or type(got) is R.Side)
    with pytest.raises(TypeError):
        D.refine([2.0], [2])


@pytest.mark.parametrize("fmt", [NC4HW4, NCHW])
@pytest.mark.parametrize("shape", [(1, 6, 2, 3), (2, 5, 3, 3), (1, 12, 5, 7)])
def test_move_keys_match_python(fmt: object, shape: tuple) -> None:
    """``_movement``'s memo key in C vs its Python lines, over the boxes of whole networks."""
    _, session = session_of(fmt, shape, units=3)  # type: ignore[arg-type]
    seen = 0
    for u in session.pipelines[0].units:  # type: ignore[attr-defined]
        if GC._COMPUTERS.get(u.op.type) is not GC._movement:
            continue  # not a box op
        found, tensors = GC.boxes(u.op, u.inputs, u.outputs), [*u.inputs, *u.outputs]
        assert D.move_key(found, tensors) == GC._move_key(found, tensors)
        seen += 1
    assert seen
    for bad in ([(0, 0, (1,), [0], [0])], [5]):
        assert _outcome(D.move_key, bad, []) == _outcome(GC._move_key, bad, [])

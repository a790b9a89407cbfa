"""The base of CPU executions that copy boxes between tensors (MNN's raster).

Concat, Slice, SliceTf, Permute, Reshape and layout conversions are described as
:class:`~mnnpy.geometry.compose.Piece` s (logical boxes) by the geometry stage
(:mod:`mnnpy.geometry`), before this execution is created: the pieces on each output
(``TensorDescribe.regions``) are already composed through the virtual tensors the op reads, so
they may read the writers' sources instead of the op's inputs. ``on_resize`` plans them into
storage regions run by ``kernels.raster``; an output marked ``virtual`` (its only reader reads
through it) is not written, but in runs with per-op callbacks (``Backend.observed``), so callbacks
see every op's output. An op the stage did not describe (or a unit that fell back from its plan)
computes its own pieces over its inputs (:meth:`CPURaster.pieces`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu import lane_gather as LG
from mnnpy.backend.cpu.executions.raster_copies import plan_copies
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.execution import Execution
from mnnpy.geometry import regions as R
from mnnpy.geometry.computers import Placed
from mnnpy.tensor import Tensor

try:  # C twins of on_resize (``_plan``, reading the plan), idle and bind (Python: the reference)
    from mnnpy.geometry import _describe as _C
except ImportError:  # not built
    _C = None  # type: ignore[assignment]

__all__ = ["CPURaster"]

_itself = LG.itself
_count = np.count_nonzero  # (a C call: ``ndarray.all`` / ``any`` go through Python wrappers)


class CPURaster(Execution):
    """Runs planned box copies (MNN's raster).

    Subclasses say what to copy when the geometry stage did not (:meth:`pieces`) and may fall
    back to a plain implementation (:meth:`resize_plain` / :meth:`execute_plain`).
    """

    reads_regions = True
    _in_place: bool | None = False  # every region copies onto the same bytes (set by ``idle``)
    _skip: list[bool]  # per output, not written (read through); these set by on_resize
    _write_all: list[bool]
    _pads: list[tuple[int, np.ndarray]]
    read_through: bool
    _seen: list | None = None  # C ``idle``'s rows onto themselves, for the ``bind`` following

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        """Every box copy as ``(output index, piece)`` reading ``inputs``; None: not boxes."""
        raise NotImplementedError

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Prepare the fall-back when the boxes need too many regions."""
        raise NotImplementedError

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Run the fall-back."""
        raise NotImplementedError

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if _C is not None:  # the C twin of the lines below
            _C.resize(self, inputs, outputs, R.MAX_REGIONS, R.padding_rows)
            return
        self._skip = [t.describe.virtual for t in outputs]
        self._in_place = False  # set by ``idle`` once the buffers exist
        self._write_all = [False] * len(outputs)
        self._copies: list[tuple[Tensor, int, np.ndarray]] | None = None
        self._gathers: dict[int, tuple[tuple[Tensor, ...], np.ndarray, list]] | None = {}
        self._pieces: list[Placed] = []
        decided = [t.describe.regions for t in outputs]
        pieces: list[Placed] | None
        if None not in decided:  # the geometry stage's plan (mnnpy.geometry)
            pieces = [(j, p) for j, r in enumerate(decided) for p in r or ()]
        else:
            pieces = self.pieces(inputs, outputs)
        # whether any input is read through its writer (the stage kept the plan in budget)
        read = {id(t) for t in inputs}
        self.read_through = any(id(p.source) not in read for _, p in pieces or ())
        copies = self._plan(pieces, outputs) if pieces is not None else None
        if pieces is None or copies is None:
            assert not self.read_through, "the geometry stage planned within the region budget"
            self.resize_plain(inputs, outputs)
            return
        self._pieces, self._copies = pieces, copies
        self._gathers = None  # planned by the first ``_runs``: an idle raster never runs
        self._pads = [(j, R.padding_rows(t.shape)) for j, t in enumerate(outputs)
                      if t.shape[1:] and t.shape[1] % 4 and t.is_packed]  # fmt: skip

    _plan = staticmethod(plan_copies)  # (``raster_copies``: the Python reference)

    def _runs(
        self, outputs: Sequence[Tensor]
    ) -> list[tuple[Tensor | tuple[Tensor, ...], int, np.ndarray]]:
        """What runs: per output its lane gathers (sources a tuple) and region rows left."""
        assert self._copies is not None
        runs: list[tuple[Tensor | tuple[Tensor, ...], int, np.ndarray]] = []
        if self._gathers is None:
            self._gathers = LG.per_output(self._copies, outputs)
        for src, j, rows in self._copies:
            if j not in self._gathers:
                onto = _itself(src, outputs[j], rows)
                same = _count(onto)  # rows onto the same bytes are left out
                if same < len(rows):
                    runs.append((src, j, rows[~onto] if same else rows))
        for j, (srcs, grows, rest) in self._gathers.items():
            runs.append((srcs, j, grows))
            runs += [(srcs[k], j, rows) for k, rows in rest]
        return runs

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Whether this execution has nothing to do with the buffers as planned.

        Every output is read through by its reader, or is its source's own storage with every region
        onto itself (an in-place Reshape), and no padding lanes to zero.
        """
        if _C is not None:  # the C twin of the lines below
            return bool(_C.idle(self, outputs, _itself))
        self._skip = [t.describe.virtual for t in outputs]  # a reader may have fallen back
        if self._copies is None:
            return False
        if all(self._skip):  # nothing to write; whether it runs in place is asked at a run
            self._in_place = None
            return True
        onto = [_count(_itself(s, outputs[j], r)) == len(r) for s, j, r in self._copies]
        self._in_place = all(onto) and not self._pads  # runs with callbacks skip it too
        for (_, j, _), same in zip(self._copies, onto, strict=True):
            if not self._skip[j] and not same:
                return False
        return all(self._skip[j] for j, _ in self._pads)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """The planned copies and padding as one C call (``bind_regions``), as on_execute.

        The outputs to skip are final by now: a reader that fell back from reading an output
        through (``Unit.prepare``) has marked it written again after this ``on_resize``.
        """
        if _C is not None:  # the C twin of the lines below (with ``_runs``)
            return _C.bind(self, outputs, _itself, LG.per_output, K.bind_regions)
        self._skip = [t.describe.virtual for t in outputs]
        if self._copies is None:
            return None
        jobs: list[tuple] = []
        for src, j, rows in self._runs(outputs):
            if not self._skip[j]:
                srcs = tuple(t.buffer for t in src) if isinstance(src, tuple) else src.buffer
                jobs.append((srcs, outputs[j].buffer, rows, False))
        jobs += [(outputs[j].buffer, outputs[j].buffer, rows, True)
                 for j, rows in self._pads if not self._skip[j]]  # fmt: skip
        return K.bind_regions(jobs, self.backend.num_thread)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if self._in_place is None:  # ``idle`` left it: every output was read through
            onto = (_count(_itself(s, outputs[j], r)) == len(r) for s, j, r in self._copies or ())
            self._in_place = all(onto) and not self._pads
        if self._in_place:  # every region onto itself (``idle``, once memory was planned)
            return
        if self._copies is None:
            self.execute_plain(inputs, outputs)
            return
        t = self.backend.num_thread
        skip = self._skip if not self.backend.observed else self._write_all
        for src, j, rows in self._runs(outputs):
            if skip[j]:
                continue
            if isinstance(src, tuple):
                K.gather_regions(tuple(x.buffer for x in src), outputs[j].buffer, rows, t)
            else:
                K.copy_regions(src.buffer, outputs[j].buffer, rows, t)
        for j, rows in self._pads:
            if not skip[j]:
                K.zero_regions(outputs[j].buffer, rows, t)

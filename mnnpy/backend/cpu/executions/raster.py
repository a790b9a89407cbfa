"""The base of CPU executions that copy boxes between tensors (MNN's raster).

Concat, Slice, SliceTf, Permute, Reshape and layout conversions describe their work as
:class:`~mnnpy.backend.cpu.regions.Piece` s (logical boxes); ``on_resize`` plans them into storage
regions run by ``kernels.raster``. Like MNN's virtual tensors, an output read by one raster
execution only is not written: the pipeline's read-through pass (``mnnpy.geometry``) hands the
writer's pieces (``virtual_regions``) to the reader, which composes its pieces with them
(``regions.compose``) and reads the writer's sources directly (``offer_read_through``); their
memory stays alive until it (``CPUBackend.retain_buffer``), and the writer skips that output
(``skip_output``). A reader composes only when the copy stays affine, within the region budget,
and reads no more tensors than either op did before (so a chain of channel shuffles keeps one
materialised tensor per unit instead of reaching back through all of them). Skipped outputs are
computed anyway in runs with per-op callbacks (``Backend.observed``), so callbacks see every
op's output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend.cpu import compose as C
from mnnpy.backend.cpu import regions as R
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.execution import Execution
from mnnpy.geometry import ReadThroughOffer
from mnnpy.tensor import Tensor

__all__ = ["CPURaster", "layout_of"]

Placed = tuple[int, C.Piece]  # (output index, piece)


def layout_of(t: Tensor, rank: int | None = None) -> R.Layout:
    """``t``'s storage layout; a lower-rank tensor gets trailing dims of 1 (same storage)."""
    shape = tuple(t.shape) + (1,) * ((rank or t.ndim) - t.ndim)
    return R.Layout(shape, t.is_packed)


def _onto_itself(src: Tensor, dst: Tensor, rows: np.ndarray) -> bool:
    """Whether every region copies ``src``'s storage onto the same places of ``dst``'s.

    The same bytes: what ``raster.pyx`` skips at run time.
    """
    a, b = src.buffer, dst.buffer
    if a is None or b is None or a.ctypes.data != b.ctypes.data:
        return False
    same = (rows[:, 0] == rows[:, 1]) & (rows[:, 5:8] == rows[:, 8:11]).all(axis=1)
    return bool(same.all())


def _sources(pieces: Sequence[Placed]) -> set[int]:
    return {id(p.source) for _, p in pieces}


class CPURaster(Execution):
    """Runs planned box copies (MNN's raster).

    Subclasses say what to copy (:meth:`pieces`) and may fall back to a plain implementation
    (:meth:`resize_plain` / :meth:`execute_plain`).
    """

    def pieces(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> list[Placed] | None:
        """Every box copy as ``(output index, piece)`` reading ``inputs``; None: not boxes."""
        raise NotImplementedError

    def resize_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Prepare the fall-back when the boxes need too many regions."""
        raise NotImplementedError

    def execute_plain(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Run the fall-back."""
        raise NotImplementedError

    def skip_output(self, index: int) -> None:
        """Output ``index`` is read through by its only reader: do not write it."""
        self._skip[index] = True

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        self._skip = [False] * len(outputs)
        self._write_all = [False] * len(outputs)
        self._copies: list[tuple[Tensor, int, np.ndarray]] | None = None
        self._pieces: list[Placed] = []
        self.read_through = False  # whether any input is read through its writer
        pieces = self.pieces(inputs, outputs)
        copies = self._plan(pieces, outputs) if pieces is not None else None
        if pieces is None or copies is None:
            self.resize_plain(inputs, outputs)
            return
        self._pieces, self._copies = pieces, copies
        pads = [(j, R.padding_regions(layout_of(t))) for j, t in enumerate(outputs)]
        self._pads = [(j, rows) for j, rows in pads if len(rows)]

    def virtual_regions(self, index: int) -> list[C.Piece] | None:
        """Output ``index``'s pieces (over this op's sources), when its copies are planned."""
        if self._copies is None:
            return None
        return [p for j, p in self._pieces if j == index]

    @staticmethod
    def _plan(
        pieces: Sequence[Placed], outputs: Sequence[Tensor]
    ) -> list[tuple[Tensor, int, np.ndarray]] | None:
        """Region rows per (source, output), or None past the region budget."""
        grouped: dict[tuple[int, int], tuple[Tensor, int, list[np.ndarray]]] = {}
        total = 0
        for j, p in pieces:
            rows = R.plan(p.space, p.src, p.dst)
            if rows is None:
                return None
            total += len(rows)
            if total > R.MAX_REGIONS:
                return None
            src: Tensor = p.source  # type: ignore[assignment]
            grouped.setdefault((id(src), j), (src, j, []))[2].append(rows)
        return [(s, j, np.concatenate(rows)) for s, j, rows in grouped.values()]

    def offer_read_through(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], tensor: Tensor, regions: object
    ) -> ReadThroughOffer | None:
        """Read ``tensor`` through its writer's pieces, if that composes within the limits."""
        if self._copies is None or not isinstance(regions, list):
            return None
        pieces = self._pieces
        composed: list[Placed] = []
        for j, p in pieces:
            if p.source is not tensor:
                composed.append((j, p))
                continue
            through = C.compose(p, regions)
            if through is None:
                return None
            composed += [(j, q) for q in through]
        fan_in = max(len(_sources(pieces)), len({id(p.source) for p in regions}))
        if len(_sources(composed)) > fan_in:
            return None
        planned = self._plan(composed, outputs)
        if planned is None:
            return None
        new = [p.source for _, p in composed if id(p.source) not in _sources(pieces)]
        return ReadThroughOffer(tuple(dict.fromkeys(new)), (composed, planned))  # type: ignore[arg-type]

    def accept_read_through(self, offer: ReadThroughOffer) -> None:
        """Copy from the writer's sources as offered."""
        self._pieces, self._copies = offer.payload  # type: ignore[misc]
        self.read_through = True

    def idle(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> bool:
        """Whether this execution has nothing to do with the buffers as planned.

        Every output is read through by its reader, or is its source's own storage with every region
        onto itself (an in-place Reshape), and no padding lanes to zero.
        """
        if self._copies is None:
            return False
        for src, j, rows in self._copies:
            if not self._skip[j] and not _onto_itself(src, outputs[j], rows):
                return False
        return all(self._skip[j] for j, _ in self._pads)

    def bind(
        self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]
    ) -> Callable[[], None] | None:
        """The planned copies and padding as one C call (``bind_regions``), as on_execute."""
        if self._copies is None:
            return None
        jobs = [(src.buffer, outputs[j].buffer, rows, False)
                for src, j, rows in self._copies if not self._skip[j]]  # fmt: skip
        jobs += [(outputs[j].buffer, outputs[j].buffer, rows, True)
                 for j, rows in self._pads if not self._skip[j]]  # fmt: skip
        return K.bind_regions(jobs, self.backend.num_thread)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        if self._copies is None:
            self.execute_plain(inputs, outputs)
            return
        t = self.backend.num_thread
        skip = self._skip if not self.backend.observed else self._write_all
        for src, j, rows in self._copies:
            if not skip[j]:
                K.copy_regions(src.buffer, outputs[j].buffer, rows, t)
        for j, rows in self._pads:
            if not skip[j]:
                K.zero_regions(outputs[j].buffer, rows, t)

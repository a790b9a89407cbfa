"""CPU Im2Col: the patch matrix as raster regions, one copy and a few zero fills per kernel tap
(MNN's ``GeometryIm2Col`` / ``GeometryConvUtils::im2Col`` regions, run by ``kernels.raster``);
CPU Col2Im: its inverse, one in-place strided NumPy add per kernel tap (MNN's ``GeometryCol2Im``
loop of regions with ``fuse = ADD``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu import regions as R
from mnnpy.backend.cpu.backend import CPUBackend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.backend.cpu.executions.raster import layout_of
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.net import OpDef, OpType
from mnnpy.ops.col2im import accumulate, image_geometry
from mnnpy.ops.im2col import Im2ColGeometry, geometry
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat


def copy_pieces(g: Im2ColGeometry, src: R.Layout) -> list[tuple[list[int], R.Side, R.Side]]:
    """Per kernel tap, the box of output positions that read the input: (space, src, dst)
    over the iteration space ``(n, c, rows, cols)``."""
    (kh, kw), (sh, sw), (dh, dw) = g.kernel, g.stride, g.dilate
    (pt, pl), (oh, ow) = g.pad, g.out_hw
    dst = R.Layout(g.out_shape, False)
    pieces = []
    for ky in range(kh):
        y0, y1 = g.valid(0, ky)
        for kx in range(kw):
            x0, x1 = g.valid(1, kx)
            if y0 == y1 or x0 == x1:
                continue
            s_start = [0, 0, y0 * sh + ky * dh - pt, x0 * sw + kx * dw - pl]
            s_terms = [[(0, 1)], [(1, 1)], [(2, sh)], [(3, sw)]]
            d_start = [ky * kw + kx, y0 * ow + x0]
            d_terms = [[(1, kh * kw)], [(0, oh * ow), (2, ow), (3, 1)]]
            space = [g.n, g.c, y1 - y0, x1 - x0]
            pieces.append((space, R.Side(src, s_start, s_terms), R.Side(dst, d_start, d_terms)))
    return pieces


def zero_rows(g: Im2ColGeometry) -> np.ndarray:
    """Region rows (destination side) covering every output element that reads padding."""
    (kh, kw), (oh, ow) = g.kernel, g.out_hw
    cols = g.n * oh * ow
    c_step = kh * kw * cols  # one channel further down the matrix
    rows: list[list[int]] = []

    def box(off: int, n0: int, n1: int, n2: int, s0: int, s1: int) -> None:
        if n0 * n1 * n2:
            rows.append([0, off, n0, n1, n2, 0, 0, 0, s0, s1, 1])

    for ky in range(kh):
        y0, y1 = g.valid(0, ky)
        for kx in range(kw):
            x0, x1 = g.valid(1, kx)
            base = (ky * kw + kx) * cols
            if y0 == y1 or x0 == x1:  # the tap never reads the input
                box(base, g.c, g.n, oh * ow, c_step, oh * ow)
                continue
            box(base, g.c, g.n, y0 * ow, c_step, oh * ow)  # rows above
            box(base + y1 * ow, g.c, g.n, (oh - y1) * ow, c_step, oh * ow)  # rows below
            for b in range(g.n):
                at = base + b * oh * ow + y0 * ow
                box(at, g.c, y1 - y0, x0, c_step, ow)  # columns left
                box(at + x1, g.c, y1 - y0, ow - x1, c_step, ow)  # columns right
    return np.array(rows, np.int64).reshape(-1, R.COLS)


class CPUIm2Col(Execution):
    """NCHW or NC4HW4 image -> 2-D patch matrix by region copies (MNN's raster of
    ``GeometryIm2Col``); an NC4HW4 input whose lanes need too many regions is unpacked into
    NCHW scratch first."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        g = geometry(self.op, x.shape)
        self._io: LogicalIO | None = None
        self._rows = self._plan(g, layout_of(x))
        if self._rows is None:  # NC4HW4 lanes past the region budget
            backend: CPUBackend = self.backend  # type: ignore[assignment]
            self._io = LogicalIO(backend, [x], [])
            self._io.release()
            self._rows = self._plan(g, R.Layout(tuple(x.shape), False))
            assert self._rows is not None, "a plain NCHW source is one region per tap and image"
        self._zeros = zero_rows(g)

    @staticmethod
    def _plan(g: Im2ColGeometry, src: R.Layout) -> np.ndarray | None:
        rows = []
        for space, s, d in copy_pieces(g, src):
            planned = R.plan(space, s, d)
            if planned is None:
                return None
            rows.append(planned)
        if sum(len(r) for r in rows) > R.MAX_REGIONS and src.packed:
            return None
        return np.concatenate(rows) if rows else np.zeros((0, R.COLS), np.int64)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        t = self.backend.num_thread
        src = inputs[0].host if self._io is None else self._io.read(inputs, flat=True)[0]
        dst = outputs[0].host
        if len(self._zeros):
            K.zero_regions(dst, self._zeros, t)
        K.copy_regions(src, dst, self._rows, t)


@CPUBackend.register_creator(OpType.Im2Col)
def create(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """4-D NCHW / NC4HW4 input of any dtype, NCHW output."""
    x, y = inputs[0], outputs[0]
    if x.ndim != 4 or x.dimension_format == DimensionFormat.NHWC or y.is_packed:
        return Unsupported(f"input rank {x.ndim} format {x.dimension_format}, output {y.shape}")
    return CPUIm2Col(backend, op)


class CPUCol2Im(Execution):
    """NCHW / NC4HW4 patch columns -> NCHW float32 image: zero, then one strided add per
    kernel tap over all images and channels (MNN's ``GeometryCol2Im``)."""

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        size = inputs[1].describe.content
        assert size is not None, "the shape function needed input 1's content"
        self._g = image_geometry(self.op, x.shape, size)
        backend: CPUBackend = self.backend  # type: ignore[assignment]
        self._io = LogicalIO(backend, [x], [])
        self._io.release()

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        g, y = self._g, outputs[0]
        (kh, kw), (oh, ow) = g.kernel, g.out_hw
        cols = self._io.read(inputs[:1], flat=True)[0].reshape(g.n, g.c, kh, kw, oh, ow)
        assert y.host is not None
        image = y.host[: y.element_size].reshape(y.shape)
        image.fill(0)
        accumulate(g, cols, image)


@CPUBackend.register_creator(OpType.Col2Im)
def create_col2im(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    """float32 2-D / 3-D columns (NCHW or NC4HW4), NCHW output."""
    x, y = inputs[0], outputs[0]
    if x.dtype != np.float32 or x.dimension_format == DimensionFormat.NHWC or y.is_packed:
        return Unsupported(f"input {x.dtype} {x.dimension_format}, output {y.dimension_format}")
    return CPUCol2Im(backend, op)

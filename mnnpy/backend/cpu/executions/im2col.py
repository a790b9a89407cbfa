"""CPU Im2Col: the patch matrix as raster regions.

One copy and a few zero fills per kernel tap (MNN's ``GeometryIm2Col`` /
``GeometryConvUtils::im2Col`` regions, run by ``kernels.raster``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mnnpy.backend import Backend
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.logical_io import LogicalIO
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry import regions as R
from mnnpy.geometry.computers import layout_of
from mnnpy.net import OpDef, OpType
from mnnpy.ops.im2col import Im2ColGeometry, geometry
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

PLAN_TAPS = 256  # NC4HW4 inputs are planned per tap and image up to this many, else unpacked


def _grid(g: Im2ColGeometry) -> tuple[np.ndarray, ...]:
    """Per (ky, kx), broadcast to ``(kh, kw)``: where the valid outputs start.

    First valid output row / column, their counts, and the input row / column the first valid one
    reads.
    """
    (sh, sw) = g.stride
    y_lo, y_hi, y_first = g.taps(0)
    x_lo, x_hi, x_first = g.taps(1)
    y0, x0 = y_lo[:, None], x_lo[None, :]
    ny, nx = (y_hi - y_lo)[:, None], (x_hi - x_lo)[None, :]
    iy, ix = (y_first + y_lo * sh)[:, None], (x_first + x_lo * sw)[None, :]
    shape = (g.kernel[0], g.kernel[1])
    return tuple(np.broadcast_to(a, shape) for a in (y0, x0, ny, nx, iy, ix))


def copy_rows(g: Im2ColGeometry) -> np.ndarray:
    """Region rows copying an NCHW input into the matrix.

    One per kernel tap and image, each ``(channels, rows, columns)`` of the box of output positions
    that read the input.
    """
    (kh, kw), (sh, sw), (ih, iw), (oh, ow) = g.kernel, g.stride, g.in_hw, g.out_hw
    cols = g.n * oh * ow
    y0, x0, ny, nx, iy, ix = (a[..., None] for a in _grid(g))
    tap = (np.arange(kh)[:, None] * kw + np.arange(kw)[None, :])[..., None]
    b = np.arange(g.n)[None, None, :]
    src = b * g.c * ih * iw + iy * iw + ix
    dst = tap * cols + b * oh * ow + y0 * ow + x0
    n1, n2, s1, d1 = ny, nx, np.full_like(ny, sh * iw), np.full_like(ny, ow)
    # whole rows on both sides (stride 1, full width): one run of ny * nx elements
    flat = (sw == 1) & (nx == ow) & (sh * iw == nx)
    n1, n2, s1, d1 = (np.where(flat, 1, n1), np.where(flat, ny * nx, n2), np.where(flat, 0, s1),
                      np.where(flat, 0, d1))  # fmt: skip
    parts = [src, dst, g.c, n1, n2, ih * iw, s1, sw, kh * kw * cols, d1, 1]
    rows = np.stack([np.broadcast_to(v, src.shape) for v in parts], axis=-1).reshape(-1, R.COLS)
    return np.ascontiguousarray(rows[(rows[:, 3] > 0) & (rows[:, 4] > 0)], dtype=np.int64)


def copy_pieces(g: Im2ColGeometry, src: R.Layout) -> list[tuple[list[int], R.Side, R.Side]]:
    """Per kernel tap, the box of :func:`copy_rows` in logical coordinates.

    Over the iteration space ``(n, c, rows, cols)``, for ``regions.plan`` (an NC4HW4 source).
    """
    (kh, kw), (sh, sw), (oh, ow) = g.kernel, g.stride, g.out_hw
    dst = R.Layout(g.out_shape, False)
    y0, x0, ny, nx, iy, ix = (a.tolist() for a in _grid(g))
    pieces = []
    for ky, kx in np.ndindex(kh, kw):
        if ny[ky][kx] and nx[ky][kx]:
            s_start = [0, 0, iy[ky][kx], ix[ky][kx]]
            s_terms = [[(0, 1)], [(1, 1)], [(2, sh)], [(3, sw)]]
            d_start = [ky * kw + kx, y0[ky][kx] * ow + x0[ky][kx]]
            d_terms = [[(1, kh * kw)], [(0, oh * ow), (2, ow), (3, 1)]]
            space = [g.n, g.c, ny[ky][kx], nx[ky][kx]]
            pieces.append((space, R.Side(src, s_start, s_terms), R.Side(dst, d_start, d_terms)))
    return pieces


def zero_rows(g: Im2ColGeometry) -> np.ndarray:
    """Region rows (destination side) covering every output element that reads padding.

    Per tap the rows above and below its box and, per image, the columns left and right of it.
    """
    (kh, kw), (oh, ow) = g.kernel, g.out_hw
    cols = g.n * oh * ow
    c_step = kh * kw * cols  # one channel further down the matrix
    y0, x0, ny, nx, _, _ = _grid(g)
    base = (np.arange(kh)[:, None] * kw + np.arange(kw)[None, :]) * cols
    empty = (ny == 0) | (nx == 0)  # the tap never reads the input: all of it
    y1, x1 = y0 + ny, x0 + nx
    boxes = [  # (offset, n1, n2, stride of n1) over (C, n1, n2) with channel stride c_step
        (base, np.where(empty, g.n, 0), oh * ow, oh * ow),
        (base, np.where(empty, 0, g.n), y0 * ow, oh * ow),
        (base + y1 * ow, np.where(empty, 0, g.n), (oh - y1) * ow, oh * ow),
    ]
    for b in range(g.n):
        at = base + b * oh * ow + y0 * ow
        boxes.append((at, np.where(empty, 0, ny), x0, ow))
        boxes.append((at + x1, np.where(empty, 0, ny), ow - x1, ow))
    rows = [
        np.stack([np.broadcast_to(v, base.shape) for v in
                  (0, off, g.c, n1, n2, 0, 0, 0, c_step, s1, 1)], axis=-1).reshape(-1, R.COLS)
        for off, n1, n2, s1 in boxes
    ]  # fmt: skip
    table = np.concatenate(rows)
    return np.ascontiguousarray(table[table[:, 3] * table[:, 4] > 0], dtype=np.int64)


class CPUIm2Col(Execution):
    """NCHW or NC4HW4 image -> 2-D patch matrix by region copies (MNN's GeometryIm2Col).

    An NC4HW4 input is read in place when its lanes need few regions, else unpacked into NCHW
    scratch first.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        x = inputs[0]
        g = geometry(self.op, x.shape)
        self._io: LogicalIO | None = None
        rows = None
        if x.is_packed and g.kernel[0] * g.kernel[1] * g.n <= PLAN_TAPS:
            rows = self._plan(g, layout_of(x))
        if x.is_packed and rows is None:  # too many lane regions: unpack first
            backend = cpu_backend(self.backend)
            self._io = LogicalIO(backend, [x], [])
            self._io.release()
        self._rows = copy_rows(g) if rows is None else rows
        self._zeros = zero_rows(g)

    @staticmethod
    def _plan(g: Im2ColGeometry, src: R.Layout) -> np.ndarray | None:
        rows, total = [], 0
        for space, s, d in copy_pieces(g, src):
            planned = R.plan(space, s, d)
            total += 0 if planned is None else len(planned)
            if planned is None or total > R.MAX_REGIONS:
                return None
            rows.append(planned)
        return np.concatenate(rows) if rows else np.zeros((0, R.COLS), np.int64)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        t = self.backend.num_thread
        src = inputs[0].buffer if self._io is None else self._io.read(inputs, flat=True)[0]
        dst = outputs[0].buffer
        if len(self._zeros):
            K.zero_regions(dst, self._zeros, t)
        if len(self._rows):
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

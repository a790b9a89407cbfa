"""CPU Raster of static models (``--saveStaticModel``): MNN's CPURaster.

Over the regions the file stores (semantics in ``mnnpy/ops/raster.py``), run by ``kernels.raster``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from mnnpy.backend import Backend, StorageType
from mnnpy.backend.cpu.backend import CPUBackend, cpu_backend
from mnnpy.backend.cpu.executions.convert_tensor import layout_kernel
from mnnpy.backend.cpu.kernels import raster as K
from mnnpy.errors import InvalidValueError
from mnnpy.execution import Execution, Unsupported
from mnnpy.geometry import regions as R
from mnnpy.geometry.computers import layout_of, reshape_piece
from mnnpy.net import OpDef, OpType, RegionDef
from mnnpy.ops.raster import check_count, reduces, region_indexes, regions_of
from mnnpy.tensor import Tensor
from mnnpy.tensor_format import DimensionFormat

__all__ = ["CPUStaticRaster"]

logger = logging.getLogger(__name__)


def _reach(offset: int, strides: Sequence[int], size: Sequence[int]) -> tuple[int, int]:
    """The lowest and highest flat index a region side touches (size > 0 everywhere)."""
    lo = hi = offset
    for n, s in zip(size, strides, strict=True):
        lo, hi = lo + min(0, (n - 1) * s), hi + max(0, (n - 1) * s)
    return lo, hi


def _flat_shift(region: RegionDef, n_src: int, n_dst: int) -> bool:
    """Whether a region copies a whole tensor onto a whole tensor in flat order."""
    n = math.prod(region.size)
    if n != n_src or n != n_dst or region.src.offset or region.dst.offset:
        return False
    run = 1
    for k in (2, 1, 0):
        if region.size[k] > 1 and (region.src.strides[k], region.dst.strides[k]) != (run, run):
            return False
        run *= region.size[k]
    return True


Dims = list[list[int]]  # iteration dims: [size, source stride, destination stride]


def _axis(stride: int, steps: Sequence[int]) -> tuple[int, int]:
    """The outermost logical dim whose step divides a flat stride, and the coefficient."""
    d = next(d for d, t in enumerate(steps) if stride % t == 0)
    return d, stride // steps[d]


def _split(dims: Dims, col: int, shape: Sequence[int], offset: int) -> bool | None:
    """Split one iteration dim whose flat stride on side ``col`` carries across dims.

    No flat stride may carry from a logical dim of ``shape`` into the next (a dim of size ``c *
    S_d`` walking dim ``d`` by ``c`` becomes an outer walk of dim ``d - 1`` and an inner one of
    ``d``). True: split one; False: nothing to split; None: the side is not a box of the logical
    dims.
    """
    steps = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    start = np.unravel_index(offset, shape)
    reach = [0] * len(shape)
    owners: list[list[int]] = [[] for _ in shape]
    for j, dim in enumerate(dims):
        if dim[0] > 1 and dim[col]:
            d, c = _axis(dim[col], steps)
            reach[d] += c * (dim[0] - 1)
            owners[d].append(j)
    for d, size in enumerate(shape):
        if start[d] + reach[d] < size:
            continue
        if len(owners[d]) != 1 or start[d] != 0:
            return None
        j = owners[d][0]
        c = dims[j][col] // steps[d]
        q = size // c if size % c == 0 else 0
        if q <= 1 or dims[j][0] % q:
            return None
        n, a, b = dims[j]
        dims[j : j + 1] = [[n // q, a * q, b * q], [q, a, b]]
        return True
    return False


def _side(dims: Dims, col: int, t: Tensor, offset: int) -> R.Side:
    if not t.is_packed:  # storage is the logical flat order
        terms = [[(j, dim[col]) for j, dim in enumerate(dims) if dim[col]]]
        return R.Side(R.Layout((t.storage_elements,), False), [offset], terms)
    steps = [math.prod(t.shape[d + 1 :]) for d in range(t.ndim)]
    terms_by_dim: list[R.Terms] = [[] for _ in t.shape]
    for j, dim in enumerate(dims):
        if dim[col]:
            d, c = _axis(dim[col], steps)
            terms_by_dim[d].append((j, c))
    start = [int(i) for i in np.unravel_index(offset, t.shape)]
    return R.Side(layout_of(t), start, terms_by_dim)


def _direct_rows(region: RegionDef, x: Tensor, out: Tensor) -> np.ndarray | None:
    """A region with non-negative strides as rows on NC4HW4 storage, or None.

    The tensors' logical flat addresses are unflattened into boxes of the logical dims.
    """
    dims = [
        [n, s, d]
        for n, s, d in zip(region.size, region.src.strides, region.dst.strides, strict=True)
        if n > 1
    ] or [[1, 0, 0]]
    sides = ((1, x, region.src.offset), (2, out, region.dst.offset))
    for _ in range(16):
        changed = [
            _split(dims, col, t.shape, off) if t.is_packed else False for col, t, off in sides
        ]
        if None in changed:
            return None
        if not any(changed):
            space = [dim[0] for dim in dims]
            src, dst = (_side(dims, col, t, off) for col, t, off in sides)
            return R.plan(space, src, dst)
    return None


class CPUStaticRaster(Execution):
    """A static model's Raster op (MNN's CPURaster), any layout.

    Its regions run as ``kernels.raster`` rows on the storage; NC4HW4 tensors are read and written
    through NCHW scratch (as MNN's temp tensors), but a whole-tensor copy in flat order is one
    planned layout conversion. Regions with negative strides or sums (destination stride 0) run as
    NumPy index copies.
    """

    def __init__(self, backend: Backend, op: OpDef) -> None:
        super().__init__(backend)
        self.op = op

    def on_resize(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        backend = cpu_backend(self.backend)
        out = outputs[0]
        regions = regions_of(self.op, len(inputs))
        self._steps: list[tuple] = []  # ("rows", src, dst, rows) | ("index", src, dst, s, d, r)
        self._unpack: list[tuple[Tensor, Tensor, Callable]] = []
        self._pack: tuple[Tensor, Callable] | None = None
        self._zero = sum(math.prod(r.size) for r in regions) != out.element_size
        self._threads = 1
        self._base: Callable | None = None
        if (
            len(regions) == 1
            and not self.op.inplace
            and _flat_shift(regions[0], inputs[0].element_size, out.element_size)
        ):
            p = reshape_piece(inputs[0], out, False)
            rows = R.plan(p.space, p.src, p.dst) if p is not None else None
            if rows is not None:  # one planned copy between the two layouts
                self._steps.append(("rows", inputs[0], None, rows))
                self._pads = R.padding_regions(layout_of(out))
                self._zero, self._threads = False, backend.num_thread
                return
        self._pads = R.padding_regions(layout_of(out))
        scratch: dict[int, Tensor] = {}
        kept = [
            i
            for i, (r, x) in enumerate(zip(regions, inputs, strict=True))
            if self._check(i, r, x, out)
        ]
        direct = self._direct([regions[i] for i in kept], [inputs[i] for i in kept], out)
        for k, i in enumerate(kept):
            region, x = regions[i], inputs[i]
            if direct is not None and k in direct:
                self._steps.append(("rows", x, None, direct[k]))
                continue
            src = x
            if x.is_packed:
                if id(x) not in scratch:
                    scratch[id(x)] = backend.acquire_scratch(x.element_size, x.dtype)
                    plain = Tensor(x.shape, x.dtype, DimensionFormat.NCHW)
                    self._unpack.append((x, scratch[id(x)], layout_kernel(x, plain)))
                src = scratch[id(x)]
            if reduces(region) or min(*region.src.strides, *region.dst.strides) < 0:
                s, d = region.src, region.dst
                si = region_indexes(s.offset, s.strides, region.size, x.element_size, "source")
                di = region_indexes(d.offset, d.strides, region.size, out.element_size, "dest")
                axes = tuple(k for k in range(3) if region.size[k] > 1 and d.strides[k] == 0)
                self._steps.append(("index", src, si, di.min(axis=axes) if axes else di, axes))
                continue
            row = [region.src.offset, region.dst.offset, *region.size]
            row += [*region.src.strides, *region.dst.strides]
            self._steps.append(("rows", src, None, np.array([row], np.int64)))
        if out.is_packed and direct is None:
            tmp = backend.acquire_scratch(out.element_size, out.dtype)
            self._pack = (tmp, layout_kernel(Tensor(out.shape, out.dtype), out))
            backend.on_release_buffer(tmp, StorageType.DYNAMIC)
        for t in scratch.values():
            backend.on_release_buffer(t, StorageType.DYNAMIC)
        self._threads = backend.num_thread if self._disjoint([regions[i] for i in kept], out) else 1
        self._base = self._base_copy(inputs, out)

    def _base_copy(self, inputs: Sequence[Tensor], out: Tensor) -> Callable | None:
        """The copy of the tensor it reads that an in-place Raster runs first, or None.

        A Raster the file has write the tensor it reads (``OpDef.inplace``) keeps that tensor's
        values outside its regions: they are copied first (instead of zeros).
        """
        if not self.op.inplace:
            return None
        self._zero = False
        x = inputs[self.op.inplace[0][0]]
        if self._pack is None:  # the regions write the output's own storage
            return lambda t: np.copyto(out.buffer, x.buffer)
        tmp = self._pack[0]
        return lambda t: layout_kernel(x, Tensor(x.shape, x.dtype))(x.buffer, tmp.buffer, t)

    def _check(self, i: int, region: RegionDef, x: Tensor, out: Tensor) -> bool:
        """Whether region ``i`` writes anything.

        It is skipped when it lies wholly past the output; every side must lie inside its tensor.

        Raises:
            InvalidValueError: for regions reaching outside a tensor, or too large.
        """
        check_count(region.size, max(x.element_size, out.element_size), f"region {i}")
        if math.prod(region.size) == 0:
            return False
        lo, hi = _reach(region.dst.offset, region.dst.strides, region.size)
        if lo >= out.element_size or hi < 0:
            # MNN's geometry leaves such regions in some files (a StridedSlice with a negative
            # step repeats its regions past the output); MNN writes them past the buffer.
            logger.debug("%s: region %d lies outside the output, skipped", self.op.name, i)
            return False
        for side, t, what in ((region.src, x, "source"), (region.dst, out, "destination")):
            lo, hi = _reach(side.offset, side.strides, region.size)
            if lo < 0 or hi >= t.element_size:
                raise InvalidValueError(
                    f"region {i} reads {what} elements {lo}..{hi} of tensor {t.name!r} "
                    f"with {t.element_size} ({region!r})"
                )
        return True

    @staticmethod
    def _direct(
        regions: Sequence[RegionDef], inputs: Sequence[Tensor], out: Tensor
    ) -> dict[int, np.ndarray] | None:
        """Rows straight on the storage for the regions touching an NC4HW4 tensor.

        None when the output is NC4HW4 and one of its regions cannot be planned so (then all go
        through scratch, as MNN's CPURaster).
        """
        rows: dict[int, np.ndarray] = {}
        for i, (r, x) in enumerate(zip(regions, inputs, strict=True)):
            if not (x.is_packed or out.is_packed) or not math.prod(r.size):
                continue
            plain = not reduces(r) and min(*r.src.strides, *r.dst.strides) >= 0
            planned = _direct_rows(r, x, out) if plain else None
            if planned is None:
                if out.is_packed:
                    return None
                continue
            rows[i] = planned
        return rows

    @staticmethod
    def _disjoint(regions: Sequence[RegionDef], out: Tensor) -> bool:
        """Whether no output element is written twice (then threads may split the rows)."""
        if out.element_size > 1 << 24 or not regions:
            return False
        if sum(math.prod(r.size) for r in regions) > out.element_size:
            return False
        written = [
            region_indexes(r.dst.offset, r.dst.strides, r.size, out.element_size, "d")
            for r in regions
        ]
        counts = np.bincount(np.concatenate([w.ravel() for w in written]))
        return bool(counts.max(initial=0) <= 1)

    def on_execute(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        out = outputs[0]
        t = self.backend.num_thread
        for x, tmp, kernel in self._unpack:
            kernel(x.buffer, tmp.buffer, t)
        dst = self._pack[0].buffer if self._pack is not None else out.buffer
        assert dst is not None
        if self._zero:
            dst.fill(0)  # padding lanes too
        elif self._base is not None:
            self._base(t)
        for step in self._steps:
            src = step[1].buffer
            if src.dtype != dst.dtype:
                src = src.view(dst.dtype)
            if step[0] == "rows":
                K.copy_regions(src, dst, step[3], self._threads)
            elif step[4]:
                dst[step[3]] = src[step[2]].sum(axis=step[4], dtype=dst.dtype)
            else:
                dst[step[3]] = src[step[2]]
        if self._pack is not None:
            self._pack[1](dst, out.buffer, t)
        elif len(self._pads) and not self._zero:
            K.zero_regions(out.buffer, self._pads, t)


@CPUBackend.register_creator(OpType.Raster)
def create_static_raster(
    op: OpDef, inputs: Sequence[Tensor], outputs: Sequence[Tensor], backend: Backend
) -> Execution | Unsupported:
    if outputs[0].dtype.itemsize not in (1, 2, 4, 8):
        return Unsupported(f"dtype {outputs[0].dtype}")
    return CPUStaticRaster(backend, op)

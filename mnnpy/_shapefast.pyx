# cython: language_level=3
"""C twin of the shape stage of one op (``mnnpy.shape_stage.shape_op_python``): the same answer.

:func:`shape_op` does what ``shape_op_python`` does (the key, the answer of the last shape stage
given back, the small function, else ``compute_shape`` then ``try_fold``), with the small-int
arithmetic of PyTorch's dynamic shapes evaluated here for the common cases: Shape, Rank,
Squeeze / Unsqueeze, Gather on a 1-D input along axis 0, Concat of 1-D values, BinaryOp on
two int32 elements, and StridedSlice of a 1-D input by one int32 begin, end and stride (no
masks). Each sets the outputs exactly as the op's Python small function
(``mnnpy.ops.small_ints``, ``mnnpy.ops.small_binary``) would, or sets nothing and declines: then
the Python small function runs, which stays the reference and raises the errors (an axis out of
range, say), so every error comes from the Python path and names the op as before. Every length,
rank and index is checked against the buffers before any is read; values are read through the
buffer protocol (C-contiguous only, else declined) and new arrays are made by ``numpy.empty``.
``tests/unit/test_shapefast.py`` compares both on the ops and on random cases.
"""

cimport cython
from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.long cimport PyLong_FromVoidPtr
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as _B
from mnnpy.net import OpParameter, OpType
from mnnpy.ops import compute_shape, try_fold
from mnnpy.ops._small import SMALL_MAX_ELEMENTS, small_function
from mnnpy.shape_stage import Shaped, _keep_same
from mnnpy.tensor import DimensionFormat

DEF MAX_RANK = 16

cdef object _empty = np.empty
cdef object _ndarray = np.ndarray
cdef object _I32 = np.dtype(np.int32)
cdef object _I64 = np.dtype(np.int64)
cdef object _NCHW = DimensionFormat.NCHW
cdef object _NC4HW4 = DimensionFormat.NC4HW4
cdef object _NHWC = DimensionFormat.NHWC
cdef Py_ssize_t _MAX_ELEMENTS = SMALL_MAX_ELEMENTS

cdef int T_SHAPE = OpType.Shape
cdef int T_RANK = OpType.Rank
cdef int T_SQUEEZE = OpType.Squeeze
cdef int T_UNSQUEEZE = OpType.Unsqueeze
cdef int T_GATHER = OpType.Gather
cdef int T_GATHERV2 = OpType.GatherV2
cdef int T_CONCAT = OpType.Concat
cdef int T_BINARY = OpType.BinaryOp
cdef int T_STRIDED = OpType.StridedSlice
cdef int P_SHAPE = OpParameter.ShapeParam
cdef int P_AXIS = OpParameter.Axis
cdef int P_BINARY = OpParameter.BinaryOp
cdef int64_t INT_MIN = -2147483648

# BinaryOp operations evaluated here (as small_binary._INT)
cdef int B_ADD = _B.ADD
cdef int B_SUB = _B.SUB
cdef int B_MUL = _B.MUL
cdef int B_MAXIMUM = _B.MAXIMUM
cdef int B_MINIMUM = _B.MINIMUM
cdef int B_SQD = _B.SquaredDifference
cdef int B_GREATER = _B.GREATER
cdef int B_GREATER_EQUAL = _B.GREATER_EQUAL
cdef int B_LESS = _B.LESS
cdef int B_LESS_EQUAL = _B.LESS_EQUAL
cdef int B_EQUAL = _B.EQUAL
cdef int B_NOTEQUAL = _B.NOTEQUAL
cdef int B_REALDIV = _B.REALDIV
cdef int B_FLOORDIV = _B.FLOORDIV
cdef int B_MOD = _B.MOD
cdef int B_FLOORMOD = _B.FLOORMOD
cdef int B_LOGICALOR = _B.LOGICALOR
cdef int B_LOGICALXOR = _B.LOGICALXOR
cdef int B_AND = _B.BITWISE_AND
cdef int B_OR = _B.BITWISE_OR
cdef int B_XOR = _B.BITWISE_XOR


def shape_op(op, inputs, outputs, bint fold, last):
    """``mnnpy.shape_stage.shape_op_python``, the same answer (see there)."""
    cdef list key = []
    cdef list values = []
    cdef bint folded
    for t in inputs:
        c = t.describe.content
        key.append((t.shape, t.dtype, t.dimension_format, PyLong_FromVoidPtr(<void*>c)))
        values.append(c)
    for t in outputs:  # run-time values If / While read
        c = t.describe.content
        key.append((PyLong_FromVoidPtr(<void*>c),))
        values.append(c)
    tkey = tuple(key)
    if last is not None and last.fold == fold and last.key == tkey:
        for out, state in zip(outputs, last.outputs, strict=True):
            out.shape, out.dtype, out.dimension_format = state[0], state[1], state[2]
            if last.folded:  # else a run-time value the session set stays
                out.describe.content = state[3]
        return last
    folded = False
    if fold and not op.output_describes:
        folded = _small(op, inputs, outputs)
        if not folded:
            small = small_function(op.type)
            folded = small is not None and small(op, inputs, outputs)
    if not folded:
        needed = compute_shape(op, inputs, outputs)
        if needed is not None:
            return needed
        folded = fold and try_fold(op, inputs, outputs)
    if folded and last is not None and last.folded:
        _keep_same(outputs, last.outputs)
    cdef list states = []
    for t in outputs:
        states.append(
            (t.shape, t.dtype, t.dimension_format, t.describe.content if folded else None)
        )
    return Shaped(fold, tkey, tuple(values), tuple(states), folded)


def small(op, inputs, outputs):
    """The C small function of ``op``: True having set the outputs, False having set nothing."""
    return _small(op, inputs, outputs)


cdef bint _small(object op, object inputs, object outputs) except -1:
    if type(inputs) is not list or type(outputs) is not list or len(outputs) != 1:
        return False
    cdef int kind = op.type
    if kind == T_UNSQUEEZE or kind == T_SQUEEZE:
        return _squeeze(op, <list>inputs, outputs[0], kind == T_UNSQUEEZE)
    if kind == T_BINARY:
        return _binary(op, <list>inputs, outputs[0])
    if kind == T_GATHERV2 or kind == T_GATHER:
        return _gather(op, <list>inputs, outputs[0])
    if kind == T_SHAPE:
        return _shape(op, <list>inputs, outputs[0])
    if kind == T_CONCAT:
        return _concat(op, <list>inputs, outputs[0])
    if kind == T_RANK:
        return _rank(op, <list>inputs, outputs[0])
    if kind == T_STRIDED:
        return _strided(op, <list>inputs, outputs[0])
    return False


cdef object _format(object op):
    """``shape._format``: the op's default format, NCHW for NC4HW4."""
    fmt = op.default_format
    return _NCHW if fmt == _NC4HW4 else fmt


cdef bint _take(object t, Py_buffer* view) except -1:
    """``t``'s values (as ``small_ints._values``) into ``view``; False (nothing held) when none.

    Known, an ndarray of ``t``'s dtype and shape, C-contiguous, at most SMALL_MAX_ELEMENTS.
    """
    c = t.describe.content
    if type(c) is not _ndarray:
        return False
    dt = c.dtype
    if dt is not t.dtype and dt != t.dtype:
        return False
    shape = t.shape
    if type(shape) is not tuple:
        return False
    try:
        PyObject_GetBuffer(c, view, PyBUF_C_CONTIGUOUS)
    except (BufferError, ValueError, TypeError):  # not C-contiguous, or no buffer
        return False
    cdef Py_ssize_t i, n = len(<tuple>shape)
    cdef bint ok = view.ndim == n and view.itemsize > 0
    if ok:
        for i in range(n):
            if view.shape[i] != (<tuple>shape)[i]:
                ok = False
                break
    if ok:
        ok = view.len // view.itemsize <= _MAX_ELEMENTS
    if not ok:
        PyBuffer_Release(view)
    return ok


cdef object _new(tuple shape, object dtype, const void* data, Py_ssize_t nbytes):
    """A new array of ``shape`` and ``dtype`` holding the ``nbytes`` bytes at ``data``."""
    out = _empty(shape, dtype)
    cdef Py_buffer view
    PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        if view.len != nbytes:
            raise AssertionError("new array of an unexpected size")
        if nbytes:
            memcpy(view.buf, data, nbytes)
    finally:
        PyBuffer_Release(&view)
    return out


cdef inline void _set(object out, tuple shape, object dtype, object fmt, object value):
    out.shape = shape
    out.dtype = dtype
    out.dimension_format = fmt
    out.describe.content = value


cdef bint _shape(object op, list inputs, object out) except -1:
    """small_ints.small_shape without a ShapeParam and without NC4HW4 read in NHWC order."""
    if not inputs:
        return False
    src = inputs[0]
    if op.param_type == P_SHAPE:
        return False
    if src.dimension_format == _NC4HW4 and op.default_format == _NHWC:
        return False
    shape = src.shape
    if type(shape) is not tuple or len(<tuple>shape) > MAX_RANK:
        return False
    cdef int32_t dims[MAX_RANK]
    cdef Py_ssize_t i, n = len(<tuple>shape)
    cdef int64_t d
    for i in range(n):
        d = (<tuple>shape)[i]
        if d < INT_MIN or d > 2147483647:
            return False
        dims[i] = <int32_t>d
    fmt = _format(op)
    value = _new((n,), _I32, dims, n * 4)
    _set(out, (n,), _I32, fmt, value)
    return True


cdef bint _rank(object op, list inputs, object out) except -1:
    """small_ints.small_rank."""
    if not inputs:
        return False
    shape = inputs[0].shape
    cdef int32_t r = len(shape)
    fmt = _format(op)
    _set(out, (), _I32, fmt, _new((), _I32, &r, 4))
    return True


cdef bint _axes(object op, list inputs, int64_t* axes, Py_ssize_t* count) except -1:
    """``squeeze._axes``: the parameter's squeezeDims, else input 1's int32 / int64 values."""
    dims = getattr(op.param, "squeezeDims", None)
    cdef Py_ssize_t i, n
    cdef Py_buffer view
    if dims is not None:
        try:  # what int() refuses (or too large): the Python path raises
            items = [int(d) for d in dims]
        except (TypeError, ValueError, OverflowError):
            return False
        n = len(items)
        if n > MAX_RANK:
            return False
        for i in range(n):
            if not -MAX_RANK <= items[i] <= MAX_RANK:
                return False  # out of range for any rank here
            axes[i] = items[i]
        count[0] = n
        return True
    if len(inputs) < 2:
        count[0] = 0
        return True
    t = inputs[1]
    if not _take(t, &view):
        return False
    n = view.len // view.itemsize
    dt = t.dtype
    ok = n <= MAX_RANK and (dt == _I32 or dt == _I64)
    if ok:
        for i in range(n):
            if view.itemsize == 4:
                axes[i] = (<int32_t*>view.buf)[i]
            else:
                axes[i] = (<int64_t*>view.buf)[i]
        count[0] = n
    PyBuffer_Release(&view)
    return ok


cdef bint _squeeze(object op, list inputs, object out, bint insert) except -1:
    """small_ints.small_squeeze for valid axes (the rest: the Python function, which raises)."""
    cdef Py_ssize_t n_in = len(inputs)
    if n_in != 1 and n_in != 2:
        return False
    cdef Py_buffer view
    cdef int64_t axes[MAX_RANK]
    cdef Py_ssize_t count = 0, i, rank, a, k
    cdef bint mark[MAX_RANK]
    src = inputs[0]
    if n_in == 2:  # every input's values known (as _all_values)
        if not _take(inputs[1], &view):
            return False
        PyBuffer_Release(&view)
    if not _axes(op, inputs, axes, &count):
        return False
    shape = src.shape
    if type(shape) is not tuple:
        return False
    cdef Py_ssize_t n = len(<tuple>shape)
    rank = n + count if insert else n
    if rank > MAX_RANK:
        return False
    for i in range(rank):
        mark[i] = False
    for i in range(count):
        a = axes[i] + rank if axes[i] < 0 else axes[i]
        if a < 0 or a >= rank:
            return False
        if insert:
            if mark[a]:
                return False
        elif (<tuple>shape)[a] != 1:
            return False
        mark[a] = True
    new = []
    if insert:
        k = 0
        for i in range(rank):
            if mark[i]:
                new.append(1)
            else:
                new.append((<tuple>shape)[k])
                k += 1
    else:
        for i in range(n):
            d = (<tuple>shape)[i]
            if (count == 0 and d != 1) or (count != 0 and not mark[i]):
                new.append(d)
    if not _take(src, &view):
        return False
    try:
        value = _new(tuple(new), src.dtype, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    _set(out, tuple(new), src.dtype, src.dimension_format, value)
    return True


cdef bint _gather(object op, list inputs, object out) except -1:
    """small_ints.small_gather: a 1-D input's elements by int32 indices in range, axis 0."""
    cdef Py_ssize_t n_in = len(inputs)
    if n_in != 2 and n_in != 3:
        return False
    src, idx = inputs[0], inputs[1]
    if idx.dtype != _I32:
        return False
    cdef Py_buffer pv, iv, av
    cdef int64_t axis = 0
    if n_in == 3:  # the axis input: its first value
        if not _take(inputs[2], &av):
            return False
        dt = inputs[2].dtype
        ok = av.len >= av.itemsize and (dt == _I32 or dt == _I64)
        if ok:
            axis = (<int32_t*>av.buf)[0] if av.itemsize == 4 else (<int64_t*>av.buf)[0]
        PyBuffer_Release(&av)
        if not ok:
            return False
    if op.param_type == P_AXIS and op.param is not None:
        p_axis = getattr(op.param, "axis", None)
        if type(p_axis) is not int or p_axis not in (0, -1):
            return False
        axis = p_axis
    if axis != 0 and axis != -1:  # resolved for rank 1: only these give 0
        return False
    if not _take(idx, &iv):
        return False
    cdef Py_ssize_t i, n, m = iv.len // 4, size
    cdef int64_t j
    cdef char buf[16 * 8]
    try:
        if not _take(src, &pv):
            return False
        try:
            if pv.ndim != 1 or pv.itemsize > 8:
                return False
            n = pv.shape[0]
            size = pv.itemsize
            if m * size > <Py_ssize_t>sizeof(buf):
                return False
            for i in range(m):
                j = (<int32_t*>iv.buf)[i]
                if j < -n or j >= n:
                    return False  # the general path names the index out of range
                if j < 0:
                    j += n
                memcpy(buf + i * size, <char*>pv.buf + j * size, size)
            shape = idx.shape
            value = _new(shape, src.dtype, buf, m * size)
        finally:
            PyBuffer_Release(&pv)
    finally:
        PyBuffer_Release(&iv)
    _set(out, shape, src.dtype, src.dimension_format, value)
    return True


cdef bint _concat(object op, list inputs, object out) except -1:
    """small_ints.small_concat: 1-D values of one dtype joined (axis 0 or -1)."""
    if not inputs:
        return False
    first = inputs[0]
    dtype = first.dtype
    try:  # what int() refuses: the Python path raises
        axis = int(getattr(op.param, "axis", 0) or 0)
    except (TypeError, ValueError):
        return False
    if axis != 0 and axis != -1:
        return False
    cdef Py_buffer view
    cdef char buf[64 * 8]
    cdef Py_ssize_t total = 0, nbytes = 0
    for t in inputs:
        tdt = t.dtype
        if tdt is not dtype and tdt != dtype:
            return False
        shape = t.shape
        if type(shape) is not tuple or len(<tuple>shape) != 1:
            return False
        if not _take(t, &view):
            return False
        try:
            if nbytes + view.len > <Py_ssize_t>sizeof(buf):
                return False
            memcpy(buf + nbytes, view.buf, view.len)
            nbytes += view.len
            total += view.shape[0]
        finally:
            PyBuffer_Release(&view)
    value = _new((total,), dtype, buf, nbytes)
    _set(out, (total,), dtype, first.dimension_format, value)
    return True


cdef inline int64_t _wrap(int64_t v):
    """``v`` wrapped to int32 (two's complement), as ``small_binary._wrap``."""
    return <int32_t><uint32_t>(<unsigned long long>v)


@cython.cdivision(True)
cdef bint _int_op(int kind, int64_t x, int64_t y, int64_t* v):
    """``small_binary._INT[kind](x, y)`` for int32 ``x`` and ``y`` (exact in int64)."""
    cdef int64_t q, r
    if kind == B_ADD:
        v[0] = x + y
    elif kind == B_SUB:
        v[0] = x - y
    elif kind == B_MUL:
        v[0] = x * y
    elif kind == B_MAXIMUM:
        v[0] = x if x >= y else y
    elif kind == B_MINIMUM:
        v[0] = x if x <= y else y
    elif kind == B_SQD:
        q = _wrap(x - y)
        v[0] = q * q
    elif kind == B_GREATER:
        v[0] = x > y
    elif kind == B_GREATER_EQUAL:
        v[0] = x >= y
    elif kind == B_LESS:
        v[0] = x < y
    elif kind == B_LESS_EQUAL:
        v[0] = x <= y
    elif kind == B_EQUAL:
        v[0] = x == y
    elif kind == B_NOTEQUAL:
        v[0] = x != y
    elif kind == B_REALDIV:  # truncates; x / 0 gives 0
        v[0] = 0 if y == 0 else x // y  # C division (cdivision): truncated
    elif kind == B_FLOORDIV:  # floored; x // 0 gives INT_MIN
        if y == 0:
            v[0] = INT_MIN
        else:
            q = x // y
            v[0] = q - 1 if x % y != 0 and (x < 0) != (y < 0) else q
    elif kind == B_MOD:  # floored
        if y == 0 or y == -1:
            v[0] = 0
        else:
            r = x % y
            v[0] = r + y if r != 0 and (r < 0) != (y < 0) else r
    elif kind == B_FLOORMOD:  # truncated: x - y * trunc(x / y)
        v[0] = 0 if y == 0 or y == -1 else x % y
    elif kind == B_LOGICALOR:
        v[0] = x != 0 or y != 0
    elif kind == B_LOGICALXOR:
        v[0] = x != y
    elif kind == B_AND:
        v[0] = x & y
    elif kind == B_OR:
        v[0] = x | y
    elif kind == B_XOR:
        v[0] = x ^ y
    else:
        return False
    return True


cdef bint _binary(object op, list inputs, object out) except -1:
    """small_binary.small_binary: one int32 element with another."""
    if len(inputs) != 2 or op.param_type != P_BINARY:
        return False
    a, b = inputs[0], inputs[1]
    if a.dtype != _I32 or b.dtype != _I32:
        return False
    param = op.param
    kind_obj = getattr(param, "opType", None)
    if type(kind_obj) is not int:
        return False
    cdef int kind = kind_obj
    cdef Py_buffer xv, yv
    cdef int64_t x, y, v = 0
    if not _take(a, &xv):
        return False
    x = (<int32_t*>xv.buf)[0] if xv.len == 4 else 0
    cdef bint one = xv.len == 4
    PyBuffer_Release(&xv)
    if not one or not _take(b, &yv):
        return False
    y = (<int32_t*>yv.buf)[0] if yv.len == 4 else 0
    one = yv.len == 4
    PyBuffer_Release(&yv)
    if not one or not _int_op(kind, x, y, &v):
        return False
    cdef int32_t r = <int32_t>_wrap(v)
    if getattr(param, "activationType", 0) == 1 and r < 0:
        r = 0
    sa, sb = a.shape, b.shape
    wide = len(sb) > len(sa)
    new = sb if wide else sa  # both hold one element: every dim is 1
    if type(new) is not tuple:
        return False
    fmt = (b if wide else a).dimension_format
    _set(out, new, _I32, fmt, _new(new, _I32, &r, 4))
    return True


cdef inline int64_t _clamp(int64_t v, int64_t lo, int64_t hi):
    return lo if v < lo else hi if v > hi else v


@cython.cdivision(True)
cdef bint _one_entry(
    int64_t dim, int64_t begin, int64_t end, int64_t s, int64_t* start, int64_t* count
):
    """``strided_slice._one`` of an entry without masks for a rank-1 input; False: declined.

    Declined where ``_one`` raises (a zero stride, MNN's shape and data disagreeing, a read
    outside the dim): the Python path raises then.
    """
    cdef int64_t b, e_shape, e_geo, lo, hi, step, n, geo, last, q
    if s == 0 or dim <= 0:
        return False
    if s < 0:  # _limit(begin, dim, False)
        b = _clamp(begin, -dim, dim - 1)
        b = b + dim if b < 0 else b
    else:
        b = dim if begin > dim else begin
    if b < 0:  # MNN wraps a negative begin modulo the dim: -(b // dim) * dim + b, floored
        q = b // dim
        if b % dim != 0:
            q -= 1  # floored (b < 0, dim > 0)
        b = -q * dim + b
    if s < 0:
        e_shape = _clamp(end, -1, dim)
        e_geo = _clamp(end, -1, 1)  # the rank (1), as MNN's geometry clamps it
    else:  # _limit(end, dim, True)
        e_shape = _clamp(end, -dim - 1, dim)
        e_shape = e_shape + dim if e_shape < 0 else e_shape
        e_geo = e_shape
    if e_shape < b:
        lo, hi, step = e_shape, b, (-s if s < 0 else s)
        if s > 0:
            lo = hi  # MNN's "temp solution" for an end before the begin
    else:
        lo, hi, step = b, e_shape, s
    n = (hi - lo - 1) // step + 1  # C division: truncated, as _trunc_div
    geo = (e_geo - b + (1 if s < 0 else -1)) // s + 1
    if n < 0 or (n != 0 and n != geo):
        return False
    last = b + (n - 1) * s
    if n != 0 and not (0 <= b < dim and 0 <= last < dim):
        return False
    start[0] = b
    count[0] = n
    return True


cdef bint _one_int(object t, int64_t* v) except -1:
    """The one int32 value of ``t`` (as ``_take``); False when it has not exactly one."""
    cdef Py_buffer view
    if t.dtype != _I32 or not _take(t, &view):
        return False
    cdef bint ok = view.len == 4
    if ok:
        v[0] = (<int32_t*>view.buf)[0]
    PyBuffer_Release(&view)
    return ok


cdef bint _strided(object op, list inputs, object out) except -1:
    """small_ints.small_strided_slice for a 1-D input, one entry, no masks.

    TensorFlow's form (``fromType`` 0: begin, end, strides) and ONNX's (1: begin, end, axes,
    steps; the axis 0, begin and end wrapped once by adding the dim).
    """
    cdef Py_ssize_t n_in = len(inputs)
    p = op.param
    if p is None or n_in < 3 or n_in > 5:
        return False
    if p.beginMask or p.endMask or p.ellipsisMask or p.newAxisMask or p.shrinkAxisMask:
        return False
    kind = p.fromType
    if kind != 0 and kind != 1:
        return False
    if kind == 0 and n_in != 4:
        return False  # 3 inputs: no strides (Python); 5: the write form
    src = inputs[0]
    shape = src.shape
    if type(shape) is not tuple or len(<tuple>shape) != 1:
        return False
    cdef int64_t dim = (<tuple>shape)[0]
    cdef int64_t begin, end, s = 1, axis = 0, start = 0, count = 0
    if not _one_int(inputs[1], &begin) or not _one_int(inputs[2], &end):
        return False
    if kind == 0:
        if not _one_int(inputs[3], &s):
            return False
    else:
        if n_in > 3 and not _one_int(inputs[3], &axis):
            return False
        if n_in > 4 and not _one_int(inputs[4], &s):
            return False
        if axis != 0 and axis != -1:
            return False
        begin = begin + dim if begin < 0 else begin
        end = end + dim if end < 0 else end
    if not _one_entry(dim, begin, end, s, &start, &count):
        return False
    cdef Py_buffer view
    cdef char buf[16 * 8]
    cdef Py_ssize_t i, size
    if not _take(src, &view):
        return False
    try:
        size = view.itemsize
        if view.ndim != 1 or view.shape[0] != dim or count * size > <Py_ssize_t>sizeof(buf):
            return False
        for i in range(count):  # 0 <= start + i * s < dim: checked by _one_entry
            memcpy(buf + i * size, <char*>view.buf + (start + i * s) * size, size)
        value = _new((count,), src.dtype, buf, count * size)
    finally:
        PyBuffer_Release(&view)
    _set(out, (count,), src.dtype, src.dimension_format, value)
    return True

# cython: language_level=3
"""C twin of the shape stage of one op (``mnnpy.shape_stage.shape_op_python``): the same answer.

:func:`shape_op` does what ``shape_op_python`` does (the key, the answer of the last shape stage
given back, the small function, else ``compute_shape`` then ``try_fold``), with the small-int
arithmetic of PyTorch's dynamic shapes evaluated here for the common cases: Shape, Rank, Squeeze /
Unsqueeze, Gather on a 1-D input along axis 0, Concat of 1-D values, BinaryOp on two int32 elements,
StridedSlice of a 1-D input by one int32 begin, end and stride (no masks), SliceTf of a 1-D input.
Each sets the output exactly as the op's Python small function (``mnnpy.ops.small_ints``,
``mnnpy.ops.small_binary``) would, or sets nothing and declines: then the Python small function
runs, which stays the reference and raises the errors (an axis out of range, say), so every error
comes from the Python path and names the op as before. The shape functions of Reshape (for a known
shape input), Permute, ConvertTensor, StridedSlice (a plan remembered) and one-input convolutions
(their geometry kept for the creator, as ``convolution.shape`` keeps it) and Concat (inputs of
any rank and values) are answered here too
(else ``compute_shape``), and ops whose inputs are not all known and that have no fold function
skip ``try_fold``, which would not fold them. :func:`shape_units` is the shape walk of
``substitute._place_all`` (``shape_stage.shape_units_python``), ``Unit.shape`` inlined.

Every length, rank and index is checked against the buffers before any is read; values are read
through the buffer protocol (C-contiguous only, else declined); new arrays are made by
``numpy.empty`` and written through their data pointer. ``tests/unit/test_shapefast.py``
compares both paths on the ops, on random cases and through resizes.
"""

cimport cython
from cpython.buffer cimport PyBuffer_Release
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromVoidPtr
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy

import numpy as np

from mnnpy._schema.MNN.BinaryOpOperation import BinaryOpOperation as _B
from mnnpy.net import OpParameter, OpType
from mnnpy.ops import _FOLDS, FOLD_MAX_ELEMENTS, compute_shape, load_all, try_fold
from mnnpy.ops.binary_op import COMPARE as _COMPARE
from mnnpy.ops.binary_op import FLOAT_FUNCS as _FLOAT_FUNCS
from mnnpy.ops.binary_op import INT_FUNCS as _INT_FUNCS
from mnnpy.ops._small import _SMALL, SMALL_MAX_ELEMENTS
from mnnpy.ops.conv_memo import keep as _conv_keep
from mnnpy.ops.convolution import ConvGeometry as _ConvGeometry
from mnnpy._schema.MNN.PadMode import PadMode as _PadMode
from mnnpy.ops.strided_slice import _PLANS as _STRIDED_PLANS
from mnnpy.shape_stage import Shaped, _keep_same
from mnnpy.tensor import DimensionFormat, Tensor, TensorDescribe

DEF MAX_RANK = 16
DEF MAX_FILL = 1 << 16  # elements of a Fill output made here


cdef extern from *:
    """
    typedef struct {
        PyObject ob_base;
        char *data;
        int nd;
        Py_ssize_t *dimensions;
        Py_ssize_t *strides;
        PyObject *base;
        PyObject *descr;
        int flags;
    } mnnpy_array_head;
    static inline void mnnpy_view_unowned(Py_buffer *v) { v->obj = NULL; }
    """
    # NumPy's PyArrayObject_fields: its first members, the stable ABI that PyArray_DATA,
    # PyArray_NDIM, PyArray_DIMS and PyArray_FLAGS read in every NumPy (1.x and 2.x)
    ctypedef struct _ArrayHead "mnnpy_array_head":
        char* data
        int nd
        Py_ssize_t* dimensions
        PyObject* descr
        int flags
    # a view holding no reference (PyBuffer_Release of it does nothing)
    void _unowned "mnnpy_view_unowned"(Py_buffer* view)


cdef extern from *:
    """
    static PyObject *mnnpy_shaped(PyObject *cls, PyObject *fold, PyObject *key,
                                  PyObject *outputs, PyObject *folded) {
        /* cls(fold, key, outputs, folded) for a tuple subclass of four fields (the
           NamedTuple Shaped): allocated with its four items and filled before anything else
           runs, as tuple.__new__(cls, items) gives it without the copy of the items */
        PyObject *t = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 4);
        if (t == NULL) return NULL;
        PyObject *items[4] = {fold, key, outputs, folded};
        for (int i = 0; i < 4; i++) {
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(t, i, items[i]);
        }
        return t;
    }
    """
    object _shaped "mnnpy_shaped"(
        object cls, object fold, object key, object outputs, object folded
    )

include "_slots.pxi"

# Tensor's, TensorDescribe's and Unit's slots, read and written in place (see _slots.pxi)
cdef object _Tensor = Tensor
cdef object _Describe = TensorDescribe
cdef Py_ssize_t _T_SHAPE = slot_offset(Tensor, "shape")
cdef Py_ssize_t _T_DTYPE = slot_offset(Tensor, "dtype")
cdef Py_ssize_t _T_FORMAT = slot_offset(Tensor, "dimension_format")
cdef Py_ssize_t _T_DESCRIBE = slot_offset(Tensor, "describe")
cdef Py_ssize_t _D_CONTENT = slot_offset(TensorDescribe, "content")
cdef Py_ssize_t _D_BACKEND = slot_offset(TensorDescribe, "backend")
# Unit's, learnt on the first shape_units (mnnpy.unit imports this module through shape_stage)
cdef object _Unit = None
cdef Py_ssize_t _U_OP = -1, _U_INPUTS = -1, _U_OUTPUTS = -1, _U_SHAPED = -1


cdef void _learn_unit() except *:
    global _Unit, _U_OP, _U_INPUTS, _U_OUTPUTS, _U_SHAPED
    from mnnpy.unit import Unit

    _U_OP, _U_INPUTS = slot_offset(Unit, "op"), slot_offset(Unit, "inputs")
    _U_OUTPUTS, _U_SHAPED = slot_offset(Unit, "outputs"), slot_offset(Unit, "_shaped")
    _Unit = Unit


cdef inline object _tensor_get(object t, Py_ssize_t off, str name):
    return slot_get(t, _Tensor, off, name)


cdef inline void _tensor_set(object t, Py_ssize_t off, str name, object value) except *:
    slot_set(t, _Tensor, off, name, value)


cdef inline object _content(object t):
    """``t.describe.content``."""
    return slot_get(_tensor_get(t, _T_DESCRIBE, "describe"), _Describe, _D_CONTENT, "content")


cdef inline void _set_content(object t, object value) except *:
    """``t.describe.content = value``."""
    slot_set(_tensor_get(t, _T_DESCRIBE, "describe"), _Describe, _D_CONTENT, "content", value)


cdef inline void _set_state(object t, object state) except *:
    """``t.shape, t.dtype, t.dimension_format = state[0], state[1], state[2]``."""
    _tensor_set(t, _T_SHAPE, "shape", state[0])
    _tensor_set(t, _T_DTYPE, "dtype", state[1])
    _tensor_set(t, _T_FORMAT, "dimension_format", state[2])


cdef inline void _unit_set(object u, Py_ssize_t off, str name, object value) except *:
    slot_set(u, _Unit, off, name, value)


cdef inline object _unit_get(object u, Py_ssize_t off, str name):
    return slot_get(u, _Unit, off, name)


if not issubclass(Shaped, tuple) or len(Shaped._fields) != 4:  # what _shaped makes
    raise ImportError("mnnpy.shape_stage.Shaped is not the four-field NamedTuple _shaped fills")

DEF NPY_ARRAY_C_CONTIGUOUS = 0x0001  # NumPy's flag (the same in 1.x and 2.x)

cdef object _empty = np.empty
cdef object _ndarray = np.ndarray
cdef object _I32 = np.dtype(np.int32)
cdef object _I64 = np.dtype(np.int64)
cdef object _NCHW = DimensionFormat.NCHW
cdef object _NC4HW4 = DimensionFormat.NC4HW4
cdef object _NHWC = DimensionFormat.NHWC
# ConvertTensor's dest values that ``convert_tensor.shape`` accepts, as formats
cdef dict _DESTS = {int(f): f for f in (_NCHW, _NHWC, _NC4HW4)}
cdef Py_ssize_t _MAX_ELEMENTS = SMALL_MAX_ELEMENTS
# data that ``try_fold`` folds with another input of at most MAX_RANK elements (the axes)
cdef Py_ssize_t _FOLD_DATA = FOLD_MAX_ELEMENTS - MAX_RANK

cdef int T_SHAPE = OpType.Shape
cdef int T_RANK = OpType.Rank
cdef int T_SQUEEZE = OpType.Squeeze
cdef int T_UNSQUEEZE = OpType.Unsqueeze
cdef int T_GATHER = OpType.Gather
cdef int T_GATHERV2 = OpType.GatherV2
cdef int T_CONCAT = OpType.Concat
cdef int T_BINARY = OpType.BinaryOp
cdef int T_STRIDED = OpType.StridedSlice
cdef int T_RESHAPE = OpType.Reshape
cdef int T_SLICE_TF = OpType.SliceTf
cdef int T_PERMUTE = OpType.Permute
cdef int T_CONVERT = OpType.ConvertTensor
cdef int T_FILL = OpType.Fill
cdef int T_CONV = OpType.Convolution
cdef int T_DEPTHWISE = OpType.ConvolutionDepthwise
cdef int PAD_SAME = _PadMode.SAME
cdef int PAD_VALID = _PadMode.VALID
cdef int P_SHAPE = OpParameter.ShapeParam
cdef int P_AXIS = OpParameter.Axis
cdef int P_BINARY = OpParameter.BinaryOp
cdef int P_RESHAPE = OpParameter.Reshape
cdef int64_t INT_MIN = -2147483648
cdef int64_t _BIG = 1LL << 40  # dims above this: left to Python (products stay in int64)
cdef int64_t _I31 = 1LL << 31  # convolution parameters above this: left to Python

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


cdef object _object_new = object.__new__
cdef object _F32 = np.dtype(np.float32)
# BinaryOp's operations ``binary_op.op_code`` accepts, and those giving int32 (comparisons)
cdef frozenset _BINARY_CODES = frozenset(_FLOAT_FUNCS) | frozenset(_INT_FUNCS)
cdef frozenset _BINARY_COMPARE = frozenset(_COMPARE)
DEF MAX_SMALL = 64  # elements of a small value computed here (_take: SMALL_MAX_ELEMENTS)


def shape_op(op, inputs, outputs, bint fold, last):
    """``mnnpy.shape_stage.shape_op_python``, the same answer (see there)."""
    return _shape_op(op, inputs, outputs, fold, last)


def shape_units(list units, Py_ssize_t start, host, folded, unit_shape, waiting):
    """``mnnpy.shape_stage.shape_units_python``, the same steps (see there)."""
    cdef Py_ssize_t i, n = len(units)
    if _Unit is None:
        _learn_unit()
    for i in range(start, n):
        unit = units[i]
        try:
            if type(unit).shape is unit_shape:  # Unit.shape, inlined
                outputs = _unit_get(unit, _U_OUTPUTS, "outputs")
                shaped = _shape_op(
                    _unit_get(unit, _U_OP, "op"),
                    _unit_get(unit, _U_INPUTS, "inputs"),
                    outputs,
                    True,
                    _unit_get(unit, _U_SHAPED, "_shaped"),
                )
                if isinstance(shaped, Shaped):
                    _unit_set(unit, _U_SHAPED, "_shaped", shaped)
                    answer = (<tuple>shaped)[3]  # .folded
                else:
                    _unit_set(unit, _U_SHAPED, "_shaped", None)
                    answer = waiting(shaped)
            else:
                outputs = None
                answer = unit.shape()
            if isinstance(answer, waiting) or not answer:
                return i, answer
            for t in (unit.outputs if outputs is None else outputs):
                d = _tensor_get(t, _T_DESCRIBE, "describe")
                slot_set(d, _Describe, _D_BACKEND, "backend", host)
            if folded is not None:
                folded.add(PyLong_FromVoidPtr(<void*>unit))  # id(unit)
        except Exception as e:
            return i, e
    return n, True


cdef bint _same_key(object old, tuple key, Py_ssize_t n_in) except -1:
    """``shape_stage._same_key``: per input its shape, dtype and format equal and its values the
    same object; per output its values the same object."""
    cdef Py_ssize_t i, n = len(key)
    if type(old) is not tuple or len(<tuple>old) != n:
        return False
    for i in range(n):
        a = (<tuple>old)[i]
        b = key[i]
        if a is b:
            continue
        if i >= 4 * n_in or i % 4 == 3:  # values: the same object only
            return False
        if not (a == b):
            return False
    return True


cdef object _shape_op(op, inputs, outputs, bint fold, last):
    """:func:`shape_op`."""
    cdef list ins = []  # per input: shape, dtype, format, values (read once, for _small)
    cdef bint folded = False
    cdef Py_ssize_t i, j, n_in = len(inputs), n = n_in + len(outputs)
    # the key (``Shaped.key``'s layout), made at its size and filled in place
    cdef tuple tkey = PyTuple_New(4 * n_in + n - n_in)
    j = 0
    for i in range(n):
        t = inputs[i] if i < n_in else outputs[i - n_in]
        c = _content(t)
        if i < n_in:
            shape = _tensor_get(t, _T_SHAPE, "shape")
            dtype = _tensor_get(t, _T_DTYPE, "dtype")
            fmt = _tensor_get(t, _T_FORMAT, "dimension_format")
            ins.append((shape, dtype, fmt, c))
            for item in (shape, dtype, fmt):
                Py_INCREF(item)
                PyTuple_SET_ITEM(tkey, j, item)
                j += 1
        Py_INCREF(c)  # run-time values If / While read, for an output
        PyTuple_SET_ITEM(tkey, j, c)
        j += 1
    if last is not None and last.fold == fold and _same_key(last.key, tkey, n_in):
        for out, state in zip(outputs, last.outputs, strict=True):
            _set_state(out, state)
            if last.folded:  # else a run-time value the session set stays
                _set_content(out, state[3])
        return last
    state = None
    if fold and not op.output_describes:
        if len(outputs) == 1:
            state = _small(op, ins)
        if state is not None:
            out = outputs[0]
            _set_state(out, state)
            _set_content(out, state[3])
            if last is None or not last.folded:
                return _shaped(Shaped, fold, tkey, (state,), True)
            folded = True
        else:
            small = _registered(_SMALL, op.type)  # ops._small.small_function
            folded = small is not None and small(op, inputs, outputs)
    if not folded:
        shaped = None
        if len(outputs) == 1 and not op.output_describes:
            shaped = _shape_only(op, ins)  # the shape function's answer (data not folded yet)
        if shaped is not None:
            out = outputs[0]
            if len(shaped) != 3:  # what the unpacking raised
                raise ValueError(f"expected 3 values to unpack (got {len(shaped)})")
            _set_state(out, shaped)
        else:
            needed = compute_shape(op, inputs, outputs)
            if needed is not None:
                return needed
        # try_fold folds an op without a fold function only when every input's values are known
        folded = fold and (_known(ins) or _registered(_FOLDS, op.type) is not None) and try_fold(
            op, inputs, outputs
        )
    if folded and last is not None and last.folded:
        _keep_same(outputs, last.outputs)
    cdef list states = []
    for t in outputs:
        states.append(
            (
                _tensor_get(t, _T_SHAPE, "shape"),
                _tensor_get(t, _T_DTYPE, "dtype"),
                _tensor_get(t, _T_FORMAT, "dimension_format"),
                _content(t) if folded else None,
            )
        )
    return _shaped(Shaped, fold, tkey, tuple(states), folded)


def small(op, inputs, outputs):
    """The C small function of ``op``: True having set the outputs, False having set nothing."""
    if len(outputs) != 1:
        return False
    ins = [(t.shape, t.dtype, t.dimension_format, t.describe.content) for t in inputs]
    state = _small(op, ins)
    if state is None:
        return False
    out = outputs[0]
    out.shape, out.dtype, out.dimension_format = state[0], state[1], state[2]
    out.describe.content = state[3]
    return True


cdef bint _loaded = False


cdef object _registered(dict table, object kind):
    """``table[kind]`` or None, every op module loaded first (as ``ops.fold_function`` and
    ``ops._small.small_function`` look them up, without their Python call per op)."""
    global _loaded
    if not _loaded:
        load_all()
        _loaded = True
    return table.get(kind)


cdef bint _known(list ins):
    """Whether every input's values are known."""
    for t in ins:
        if (<tuple>t)[3] is None:
            return False
    return True


cdef object _small(object op, list ins):
    """The output's (shape, dtype, format, values) for ``op`` on ``ins``; None: declined."""
    cdef int kind = op.type
    if kind == T_UNSQUEEZE or kind == T_SQUEEZE:
        return _squeeze(op, ins, kind == T_UNSQUEEZE)
    if kind == T_BINARY:
        return _binary(op, ins)
    if kind == T_GATHERV2 or kind == T_GATHER:
        return _gather(op, ins)
    if kind == T_STRIDED:
        return _strided(op, ins)
    if kind == T_SHAPE:
        return _shape(op, ins)
    if kind == T_SLICE_TF:
        return _slice_tf(ins)
    if kind == T_CONCAT:
        return _concat(op, ins)
    if kind == T_RANK:
        return _rank(op, ins)
    if kind == T_FILL:
        return _fill(ins)
    return None


cdef object _format(object op):
    """``shape._format``: the op's default format, NCHW for NC4HW4."""
    fmt = op.default_format
    return _NCHW if fmt == _NC4HW4 else fmt


cdef inline bint _take(tuple t, Py_buffer* view) except -1:
    """Input ``t``'s values (as ``small_ints._values``) into ``view``; False (nothing held): none.

    ``t`` is (shape, dtype, format, values). Known, an ndarray of that dtype and shape,
    C-contiguous, at most SMALL_MAX_ELEMENTS elements (see ``_take_upto``).
    """
    return _take_upto(t, view, _MAX_ELEMENTS)


cdef bint _take_upto(tuple t, Py_buffer* view, Py_ssize_t most) except -1:
    """``_take`` of values of at most ``most`` elements.

    ``view`` is filled from the array's own
    fields (NumPy's ``PyArray_DATA``, ``PyArray_DIMS``, ``PyArray_FLAGS``), not by a buffer
    request (NumPy formats a buffer description of the array for that): it holds no reference
    (``view.obj`` is NULL, so ``PyBuffer_Release`` of it does nothing) and is read while ``t``
    holds the array.
    """
    c = t[3]
    if type(c) is not _ndarray:
        return False
    cdef _ArrayHead* head = <_ArrayHead*><void*>c
    dt, tdt = <object>head.descr, t[1]  # c.dtype, read from the array (no attribute look-up)
    if dt is not tdt and dt != tdt:
        return False
    shape = t[0]
    if type(shape) is not tuple:
        return False
    if not head.flags & NPY_ARRAY_C_CONTIGUOUS:
        return False
    cdef Py_ssize_t i, n = len(<tuple>shape), count = 1, size
    size = 4 if dt is _I32 or dt is _F32 else 8 if dt is _I64 else dt.itemsize
    if head.nd != n or size <= 0:
        return False
    for i in range(n):
        if head.dimensions[i] != (<tuple>shape)[i]:
            return False
        count *= head.dimensions[i]
    if count > most:
        return False
    view.buf = head.data
    _unowned(view)
    view.len = count * size
    view.itemsize = size
    view.readonly = 1
    view.ndim = n
    view.format = NULL
    view.shape = head.dimensions
    view.strides = NULL
    view.suboffsets = NULL
    view.internal = NULL
    return True


cdef object _new(tuple shape, object dtype, const void* data, Py_ssize_t nbytes):
    """A new array of ``shape`` and ``dtype`` holding the ``nbytes`` bytes at ``data``.

    ``nbytes`` is the elements of ``shape`` times the dtype's item size (the caller's values are
    of that dtype). A fresh ``numpy.empty`` array is C-contiguous and owns its data, so its data
    pointer is written directly (NumPy's ``PyArray_DATA``), without a buffer request (which makes
    NumPy format a buffer description of every new array).
    """
    out = _empty(shape, dtype)
    if type(out) is not _ndarray:
        raise AssertionError("numpy.empty gave no ndarray")
    cdef _ArrayHead* head = <_ArrayHead*><void*>out
    cdef Py_ssize_t i, n = len(shape), count = 1
    if head.nd != n:
        raise AssertionError("new array of an unexpected rank")
    for i in range(n):
        count *= head.dimensions[i]
    if nbytes and (count == 0 or nbytes % count):
        raise AssertionError("new array of an unexpected size")
    if nbytes:
        memcpy(head.data, data, nbytes)
    return out


cdef object _shape(object op, list ins):
    """small_ints.small_shape without a ShapeParam and without NC4HW4 read in NHWC order."""
    if not ins:
        return None
    src = <tuple>ins[0]
    if op.param_type == P_SHAPE:
        return None
    if src[2] == _NC4HW4 and op.default_format == _NHWC:
        return None
    shape = src[0]
    if type(shape) is not tuple or len(<tuple>shape) > MAX_RANK:
        return None
    cdef int32_t dims[MAX_RANK]
    cdef Py_ssize_t i, n = len(<tuple>shape)
    cdef int64_t d
    for i in range(n):
        d = (<tuple>shape)[i]
        if d < INT_MIN or d > 2147483647:
            return None
        dims[i] = <int32_t>d
    return ((n,), _I32, _format(op), _new((n,), _I32, dims, n * 4))


cdef object _rank(object op, list ins):
    """small_ints.small_rank."""
    if not ins:
        return None
    cdef int32_t r = len((<tuple>ins[0])[0])
    return ((), _I32, _format(op), _new((), _I32, &r, 4))


cdef bint _ints(
    object a, int64_t* out, Py_ssize_t most, int64_t lo, int64_t hi, Py_ssize_t* count
) except -1:
    """``[int(v) for v in a]`` into ``out``: a list or tuple of ints, or a 1-D C-contiguous int32
    / int64 ndarray, of at most ``most`` values in [lo, hi]; False (nothing read): anything else.

    An array is read from its own fields (as ``_take_upto``), without a NumPy scalar per value.
    """
    cdef Py_ssize_t i, n, size = 0
    cdef int64_t v
    cdef _ArrayHead* head
    if type(a) is list or type(a) is tuple:
        n = len(a)
        if n > most:
            return False
        for i in range(n):
            if not _small_int(a[i], &v) or not lo <= v <= hi:
                return False
            out[i] = v
        count[0] = n
        return True
    if type(a) is not _ndarray:
        return False
    dt = a.dtype
    if dt is _I32 or dt == _I32:
        size = 4
    elif dt is _I64 or dt == _I64:
        size = 8
    else:
        return False
    head = <_ArrayHead*><void*>a
    if head.nd != 1 or not head.flags & NPY_ARRAY_C_CONTIGUOUS:
        return False
    n = head.dimensions[0]
    if n > most:
        return False
    for i in range(n):
        v = (<int32_t*>head.data)[i] if size == 4 else (<int64_t*>head.data)[i]
        if not lo <= v <= hi:
            return False  # out of range: the Python path says what
        out[i] = v
    count[0] = n
    return True


cdef bint _axes(object op, list ins, int64_t* axes, Py_ssize_t* count) except -1:
    """``squeeze._axes``: the parameter's squeezeDims, else input 1's int32 / int64 values."""
    dims = getattr(op.param, "squeezeDims", None)
    cdef Py_ssize_t i, n
    cdef Py_buffer view
    if dims is not None:
        if _ints(dims, axes, MAX_RANK, -MAX_RANK, MAX_RANK, count):  # read in place
            return True
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
    if len(ins) < 2:
        count[0] = 0
        return True
    t = <tuple>ins[1]
    if not _take(t, &view):
        return False
    n = view.len // view.itemsize
    dt = t[1]
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


cdef object _squeeze(object op, list ins, bint insert):
    """small_ints.small_squeeze for valid axes (the rest: the Python function, which raises).

    Data of more elements than the small function takes (up to what ``try_fold`` folds) is
    copied too: the general path's shape function and reference give the same.
    """
    cdef Py_ssize_t n_in = len(ins)
    if n_in != 1 and n_in != 2:
        return None
    cdef Py_buffer view
    cdef int64_t axes[MAX_RANK]
    cdef Py_ssize_t count = 0, i, rank, a, k
    cdef bint mark[MAX_RANK]
    src = <tuple>ins[0]
    if n_in == 2 and getattr(op.param, "squeezeDims", None) is not None:
        if not _take(<tuple>ins[1], &view):  # every input's values known (as _all_values)
            return None
        PyBuffer_Release(&view)
    if not _axes(op, ins, axes, &count):  # reads input 1 when the parameter has no axes
        return None
    shape = src[0]
    if type(shape) is not tuple:
        return None
    cdef Py_ssize_t n = len(<tuple>shape)
    rank = n + count if insert else n
    if rank > MAX_RANK:
        return None
    for i in range(rank):
        mark[i] = False
    for i in range(count):
        a = axes[i] + rank if axes[i] < 0 else axes[i]
        if a < 0 or a >= rank:
            return None
        if insert:
            if mark[a]:
                return None
        elif (<tuple>shape)[a] != 1:
            return None
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
    if not _take_upto(src, &view, _FOLD_DATA):  # any data try_fold folds: a copy, reshaped
        return None
    new_shape = tuple(new)
    try:
        value = _new(new_shape, src[1], view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return (new_shape, src[1], src[2], value)


cdef object _gather(object op, list ins):
    """small_ints.small_gather: a 1-D input's elements by int32 indices in range, axis 0."""
    cdef Py_ssize_t n_in = len(ins)
    if n_in != 2 and n_in != 3:
        return None
    src, idx = <tuple>ins[0], <tuple>ins[1]
    if idx[1] != _I32:
        return None
    cdef Py_buffer pv, iv, av
    cdef int64_t axis = 0
    if n_in == 3:  # the axis input: its first value
        if not _take(<tuple>ins[2], &av):
            return None
        dt = (<tuple>ins[2])[1]
        ok = av.len >= av.itemsize and (dt == _I32 or dt == _I64)
        if ok:
            axis = (<int32_t*>av.buf)[0] if av.itemsize == 4 else (<int64_t*>av.buf)[0]
        PyBuffer_Release(&av)
        if not ok:
            return None
    if op.param_type == P_AXIS and op.param is not None:
        p_axis = getattr(op.param, "axis", None)
        if type(p_axis) is not int or p_axis not in (0, -1):
            return None
        axis = p_axis
    if axis != 0 and axis != -1:  # resolved for rank 1: only these give 0
        return None
    if not _take(idx, &iv):
        return None
    cdef Py_ssize_t i, n, m = iv.len // 4, size
    cdef int64_t j
    cdef char buf[16 * 8]
    try:
        if not _take(src, &pv):
            return None
        try:
            if pv.ndim != 1 or pv.itemsize > 8:
                return None
            n = pv.shape[0]
            size = pv.itemsize
            if m * size > <Py_ssize_t>sizeof(buf):
                return None
            for i in range(m):
                j = (<int32_t*>iv.buf)[i]
                if j < -n or j >= n:
                    return None  # the general path names the index out of range
                if j < 0:
                    j += n
                memcpy(buf + i * size, <char*>pv.buf + j * size, size)
            shape = idx[0]
            value = _new(shape, src[1], buf, m * size)
        finally:
            PyBuffer_Release(&pv)
    finally:
        PyBuffer_Release(&iv)
    return (shape, src[1], src[2], value)


cdef object _concat(object op, list ins):
    """small_ints.small_concat: 1-D values of one dtype joined (axis 0 or -1)."""
    if not ins:
        return None
    first = <tuple>ins[0]
    dtype = first[1]
    try:  # what int() refuses: the Python path raises
        axis = int(getattr(op.param, "axis", 0) or 0)
    except (TypeError, ValueError):
        return None
    if axis != 0 and axis != -1:
        return None
    cdef Py_buffer view
    cdef char buf[64 * 8]
    cdef Py_ssize_t total = 0, nbytes = 0
    for t in ins:
        tdt = (<tuple>t)[1]
        if tdt is not dtype and tdt != dtype:
            return None
        shape = (<tuple>t)[0]
        if type(shape) is not tuple or len(<tuple>shape) != 1:
            return None
        if not _take(<tuple>t, &view):
            return None
        try:
            if nbytes + view.len > <Py_ssize_t>sizeof(buf):
                return None
            memcpy(buf + nbytes, view.buf, view.len)
            nbytes += view.len
            total += view.shape[0]
        finally:
            PyBuffer_Release(&view)
    return ((total,), dtype, first[2], _new((total,), dtype, buf, nbytes))


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


cdef object _broadcast(object sa, object sb):
    """``binary_op.broadcast_shape`` of two shapes (their own int objects); None: they do not."""
    if type(sa) is not tuple or type(sb) is not tuple:
        return None
    cdef Py_ssize_t i, ra = len(<tuple>sa), rb = len(<tuple>sb), r = ra if ra > rb else rb
    if r > MAX_RANK:
        return None
    dims = [None] * r
    for i in range(r):
        da = (<tuple>sa)[i - (r - ra)] if i >= r - ra else 1
        db = (<tuple>sb)[i - (r - rb)] if i >= r - rb else 1
        if type(da) is not int or type(db) is not int or da < 0 or db < 0:
            return None
        if da == db or db == 1:
            dims[i] = da
        elif da == 1:
            dims[i] = db
        else:
            return None  # the shape function raises
    return tuple(dims)


cdef object _binary(object op, list ins):
    """BinaryOp on int32 values (``_take``: SMALL_MAX_ELEMENTS at most), as the general path folds.

    One element with another is ``small_binary.small_binary``; values of more elements
    (the same shape once broadcast, or one element with many) are computed element by element
    with the same int32 arithmetic (``small_binary._INT``, which is the NumPy reference's).
    Other broadcasts are declined.
    """
    if len(ins) != 2 or op.param_type != P_BINARY:
        return None
    a, b = <tuple>ins[0], <tuple>ins[1]
    if a[1] != _I32 or b[1] != _I32:
        return None
    param = op.param
    kind_obj = getattr(param, "opType", None)
    if type(kind_obj) is not int:
        return None
    sa = a[0]
    new = sa if sa == b[0] and type(sa) is tuple else _broadcast(sa, b[0])  # commonly the same
    if new is None:
        return None
    cdef int kind = kind_obj
    cdef bint relu = getattr(param, "activationType", 0) == 1
    cdef Py_buffer xv, yv
    cdef int32_t r[MAX_SMALL]
    cdef int32_t* x
    cdef int32_t* y
    cdef int64_t v = 0
    cdef Py_ssize_t i, nx, ny, n = 1
    if not _int_op(kind, 0, 1, &v):
        return None  # an operation not computed here (checked before any element is)
    for d in <tuple>new:
        n *= <Py_ssize_t>d
        if n > MAX_SMALL:
            return None
    if not _take(a, &xv):
        return None
    if not _take(b, &yv):
        PyBuffer_Release(&xv)
        return None
    try:
        nx, ny = xv.len // 4, yv.len // 4
        x, y = <int32_t*>xv.buf, <int32_t*>yv.buf
        if (nx != n and nx != 1) or (ny != n and ny != 1):
            return None  # a broadcast along an inner dim: the general path
        for i in range(n):
            if not _int_op(kind, x[i if nx == n else 0], y[i if ny == n else 0], &v):
                return None
            r[i] = <int32_t>_wrap(v)
            if relu and r[i] < 0:
                r[i] = 0
    finally:
        PyBuffer_Release(&xv)
        PyBuffer_Release(&yv)
    wide = len(<tuple>b[0]) > len(<tuple>a[0])
    return (new, _I32, (b if wide else a)[2], _new(new, _I32, r, n * 4))


cdef object _binary_shape(object op, list ins):
    """``binary_op.shape`` for inputs of one dtype (float32 or int32) that broadcast."""
    if len(ins) != 2 or op.param_type != P_BINARY:
        return None
    a, b = <tuple>ins[0], <tuple>ins[1]
    dtype = a[1]
    if dtype is not b[1] or (dtype is not _F32 and dtype is not _I32):
        return None
    code = getattr(op.param, "opType", None)
    if type(code) is not int or code not in _BINARY_CODES:
        return None
    new = _broadcast(a[0], b[0])
    if new is None:
        return None
    wide = len(<tuple>b[0]) > len(<tuple>a[0])
    return (new, _I32 if code in _BINARY_COMPARE else dtype, (b if wide else a)[2])


cdef object _fill(list ins):
    """Fill (``fill.shape`` then its reference) from an int32 shape of rank 0 or 1 and a value.

    The output holds at most MAX_FILL elements, each the value's first (its bytes copied);
    declined for a negative dim (the shape function raises) and values of other kinds.
    """
    if len(ins) != 2:
        return None
    s, value = <tuple>ins[0], <tuple>ins[1]
    vt = value[1]
    if s[1] != _I32 or (vt != _F32 and vt != _I32 and vt != _I64):
        return None
    cdef Py_buffer sv, vv
    cdef Py_ssize_t i, rank, count = 1, size
    cdef char* data
    cdef int64_t d
    if not _take(s, &sv):
        return None
    try:
        rank = sv.ndim
        if rank > 1 or (rank == 1 and sv.shape[0] > MAX_RANK):
            return None
        dims = [0] * (sv.shape[0] if rank == 1 else 1)
        for i in range(len(dims)):
            d = (<int32_t*>sv.buf)[i]
            if d < 0:
                return None
            dims[i] = d
            count *= d
            if count > MAX_FILL:
                return None
    finally:
        PyBuffer_Release(&sv)
    new = tuple(dims)
    if not _take(value, &vv):
        return None
    try:
        size = vv.itemsize
        if vv.len < size:
            return None  # no element: the shape function raises
        out = _empty(new, vt)
        if type(out) is not _ndarray:
            raise AssertionError("numpy.empty gave no ndarray")
        data = (<_ArrayHead*><void*>out).data
        for i in range(count):
            memcpy(data + i * size, vv.buf, size)
    finally:
        PyBuffer_Release(&vv)
    return (new, vt, value[2], out)


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


cdef bint _one_int(tuple t, int64_t* v) except -1:
    """The one int32 value of input ``t`` (as ``_take``); False when it has not exactly one."""
    cdef Py_buffer view
    if t[1] != _I32 or not _take(t, &view):
        return False
    cdef bint ok = view.len == 4
    if ok:
        v[0] = (<int32_t*>view.buf)[0]
    PyBuffer_Release(&view)
    return ok


cdef object _strided(object op, list ins):
    """small_ints.small_strided_slice for a 1-D input, one entry, no masks.

    TensorFlow's form (``fromType`` 0: begin, end, strides) and ONNX's (1: begin, end, axes,
    steps; the axis 0, begin and end wrapped once by adding the dim).
    """
    cdef Py_ssize_t n_in = len(ins)
    p = op.param
    if p is None or n_in < 3 or n_in > 5:
        return None
    if p.beginMask or p.endMask or p.ellipsisMask or p.newAxisMask or p.shrinkAxisMask:
        return None
    kind = p.fromType
    if kind != 0 and kind != 1:
        return None
    if kind == 0 and n_in != 4:
        return None  # 3 inputs: no strides (Python); 5: the write form
    src = <tuple>ins[0]
    shape = src[0]
    if type(shape) is not tuple or len(<tuple>shape) != 1:
        return None
    cdef int64_t dim = (<tuple>shape)[0]
    cdef int64_t begin, end, s = 1, axis = 0, start = 0, count = 0
    if not _one_int(<tuple>ins[1], &begin) or not _one_int(<tuple>ins[2], &end):
        return None
    if kind == 0:
        if not _one_int(<tuple>ins[3], &s):
            return None
    else:
        if n_in > 3 and not _one_int(<tuple>ins[3], &axis):
            return None
        if n_in > 4 and not _one_int(<tuple>ins[4], &s):
            return None
        if axis != 0 and axis != -1:
            return None
        begin = begin + dim if begin < 0 else begin
        end = end + dim if end < 0 else end
    if not _one_entry(dim, begin, end, s, &start, &count):
        return None
    cdef Py_buffer view
    cdef char buf[16 * 8]
    cdef Py_ssize_t i, size
    if not _take(src, &view):
        return None
    try:
        size = view.itemsize
        if view.ndim != 1 or view.shape[0] != dim or count * size > <Py_ssize_t>sizeof(buf):
            return None
        for i in range(count):  # 0 <= start + i * s < dim: checked by _one_entry
            memcpy(buf + i * size, <char*>view.buf + (start + i * s) * size, size)
        value = _new((count,), src[1], buf, count * size)
    finally:
        PyBuffer_Release(&view)
    return ((count,), src[1], src[2], value)


cdef object _shape_only(object op, list ins):
    """The output's (shape, dtype, format) from the op's shape function; None: declined."""
    cdef int kind = op.type
    if kind == T_RESHAPE:
        return _reshape(op, ins)
    if kind == T_PERMUTE:
        return _permute(op, ins)
    if kind == T_CONVERT:
        return _convert(op, ins)
    if kind == T_STRIDED:
        return _strided_shape(op, ins)
    if kind == T_BINARY:
        return _binary_shape(op, ins)
    if kind == T_CONV or kind == T_DEPTHWISE:
        return _conv_shape(op, ins)
    if kind == T_CONCAT:
        return _concat_shape(op, ins)
    return None


cdef object _concat_shape(object op, list ins):
    """``concat.shape``: the joined shape, input 0's dtype and format.

    Declined (None: the Python function raises what it raises) for inputs of other dtypes, an
    axis out of range, shapes that do not join, and dims that are not ints in [0, 2**40].
    """
    if not ins:
        return None
    first = <tuple>ins[0]
    shape, dtype = first[0], first[1]
    if type(shape) is not tuple:
        return None
    cdef tuple lead = <tuple>shape
    cdef Py_ssize_t i, rank, n = len(lead)
    cdef int64_t dim, total = 0
    axis = getattr(op.param, "axis", 0) or 0
    if type(axis) is not int or not -n <= axis < n:
        return None
    cdef Py_ssize_t a = axis + n if axis < 0 else axis
    for i in range(n):
        if not _small_int(lead[i], &dim) or dim < 0:
            return None
    for t in ins:
        s, dt = (<tuple>t)[0], (<tuple>t)[1]
        if (dt is not dtype and dt != dtype) or type(s) is not tuple:
            return None
        rank = len(<tuple>s)
        if not a < rank <= n:
            return None
        for i in range(rank):
            if i != a and (<tuple>s)[i] != lead[i]:
                return None
        for i in range(rank, n):
            if lead[i] != 1:
                return None
        if not _small_int((<tuple>s)[a], &dim) or dim < 0:
            return None
        total += dim
    return (lead[:a] + (total,) + lead[a + 1 :], dtype, first[2])


cdef inline bint _small_int(object v, int64_t* out) except -1:
    """``v`` into ``out`` when it is an int in [-_BIG, _BIG]; False: anything else."""
    if type(v) is not int:
        return False
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or not -_BIG <= x <= _BIG:
        return False
    out[0] = x
    return True


@cython.cdivision(True)
cdef inline int64_t _trunc(int64_t a, int64_t b):
    """C's ``a / b`` for ``b > 0`` (``int(a / b)`` in Python, exact for these magnitudes)."""
    return a // b


cdef inline int64_t _floor(int64_t a, int64_t b):
    """Python's ``a // b`` for ``b > 0``."""
    cdef int64_t q = _trunc(a, b)
    return q - 1 if q * b != a and a < 0 else q


cdef bint _conv_axis(
    int64_t size, int64_t k, int64_t s, int64_t d, int mode, int64_t* pads, Py_ssize_t n_pads,
    int64_t pad, int a, int64_t* out, int64_t* before,
):
    """``convolution._axis``: (output size, padding before) along axis ``a`` (0 = y, 1 = x)."""
    cdef int64_t k_eff = d * (k - 1) + 1, total, o
    if mode == PAD_SAME:
        o = -_floor(-size, s)
        out[0] = o
        before[0] = _trunc((o - 1) * s + k_eff - size, 2)
        return True
    before[0] = pads[a] if n_pads >= 2 else pad
    if mode == PAD_VALID:
        out[0] = -_floor(-(size - k_eff + 1), s)
        return True
    if n_pads:
        total = size + pads[a] + pads[a + 2]
        out[0] = _floor(total - k_eff, s) + 1 if total >= k_eff else 0
        return True
    out[0] = _trunc(size + 2 * pad - k_eff, s) + 1
    return True


cdef object _conv_shape(object op, list ins):
    """``convolution.shape`` of a one-input convolution whose geometry resolves.

    The geometry (``convolution.conv_geometry``) is computed here and kept for the creator
    (``conv_memo.keep``) as the Python function keeps it; every value is read as a Python int
    within +-2**40 (``pads`` as ``_ints``). Declined (None) for anything else and wherever
    ``conv_geometry`` raises: the Python function then raises it.
    """
    if len(ins) != 1:
        return None
    x = <tuple>ins[0]
    shape, fmt = x[0], x[2]
    if type(shape) is not tuple or len(<tuple>shape) != 4:
        return None
    common = getattr(op.param, "common", None)
    if common is None:
        return None
    cdef int64_t dims[4]
    cdef int64_t f[13]  # oc, ky, kx, sy, sx, dy, dx, ic, group, padMode, padY, padX, unused
    cdef int64_t pads[MAX_RANK]
    cdef Py_ssize_t i, n_pads = 0
    for i in range(4):
        if not _small_int((<tuple>shape)[i], &dims[i]) or dims[i] < 0:
            return None
    nhwc = fmt == _NHWC
    if nhwc:  # nchw_shape: (N, H, W, C) read as (N, C, H, W)
        dims[1], dims[2], dims[3] = dims[3], dims[1], dims[2]
    fields = (
        common.outputCount, common.kernelY, common.kernelX, common.strideY, common.strideX,
        common.dilateY, common.dilateX, common.inputCount, common.group, common.padMode,
        common.padY, common.padX,
    )
    for i in range(12):  # at most 2**31 (int32 in the file): products stay in int64
        if not _small_int(fields[i], &f[i]) or not -_I31 <= f[i] <= _I31:
            return None
    cdef int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3]
    cdef int64_t oc = f[0], ky = f[1], kx = f[2], sy = f[3], sx = f[4], dy = f[5], dx = f[6]
    cdef int64_t ic = f[7], group = f[8], oh, ow, top, left
    cdef int mode = <int>f[9]
    if min(ky, kx, sy, sx, dy, dx) < 1 or oc < 1:
        return None
    if op.type == T_DEPTHWISE:  # convolution._group: one group per channel
        ic, group = 1, c
    if ic != 0 and ic != c and ic * group != c:
        return None
    if ic > 0 and ic != c:
        group = c // ic
    if group < 1 or c % group:  # c >= 0, group >= 1: C's % is Python's
        return None
    if oc % group:
        return None
    raw = common.pads
    if raw is not None:
        if not _ints(raw, pads, MAX_RANK, -_BIG, _BIG, &n_pads):
            return None
        if mode != PAD_SAME and mode != PAD_VALID and n_pads < 4:
            return None
    _conv_axis(h, ky, sy, dy, mode, pads, n_pads, f[10], 0, &oh, &top)
    _conv_axis(w, kx, sx, dx, mode, pads, n_pads, f[11], 1, &ow, &left)
    if oh < 1 or ow < 1:
        return None
    geo = _object_new(_ConvGeometry)  # frozen: its fields set through its __dict__
    cdef dict d = geo.__dict__
    d["batch"], d["in_channels"], d["in_hw"], d["out_channels"] = n, c, (h, w), oc
    d["out_hw"], d["group"], d["kernel"], d["stride"] = (oh, ow), group, (ky, kx), (sy, sx)
    d["dilate"], d["pad"] = (dy, dx), (top, left)
    _conv_keep((op, (n, c, h, w) if nhwc else shape, None), geo)
    return ((n, oh, ow, oc) if nhwc else (n, oc, oh, ow), _F32, fmt)


class _Miss(Exception):
    """A plan not remembered: left to the Python path, which computes it (and its errors)."""


def _miss():
    raise _Miss


cdef object _strided_shape(object op, list ins):
    """``strided_slice.shape`` by a plan ``strided_slice.plan`` remembered: its output shape.

    The key is built as ``strided_slice.plan`` builds it, from begin / end / strides (axes, steps)
    known as int32 or int64 arrays (as ``_take`` reads them). Declined (None) for other values,
    and for a plan not remembered: the Python function then computes it, and raises what it raises.
    """
    cdef Py_ssize_t i, j, count, n_in = len(ins)
    p = op.param
    if p is None or n_in < 3 or n_in > 5:
        return None
    src = <tuple>ins[0]
    shape = src[0]
    if type(shape) is not tuple:
        return None
    key = [p.fromType, p.beginMask, p.endMask, p.ellipsisMask, p.newAxisMask, p.shrinkAxisMask]
    key.append(shape)
    cdef Py_buffer view
    cdef const int32_t* i32
    cdef const int64_t* i64
    for i in range(1, n_in):
        t = <tuple>ins[i]
        if not _take(t, &view):
            return None
        try:
            count = view.len // view.itemsize
            ints = []
            if view.itemsize == 4 and t[1] == _I32:
                i32 = <const int32_t*>view.buf
                for j in range(count):
                    ints.append(i32[j])
            elif view.itemsize == 8 and t[1] == _I64:
                i64 = <const int64_t*>view.buf
                for j in range(count):
                    ints.append(i64[j])
            else:
                return None
        finally:
            PyBuffer_Release(&view)
        key.append(tuple(ints))
    try:
        plan = _STRIDED_PLANS.get(tuple(key), _miss)
    except _Miss:
        return None
    out = plan[2]
    if type(out) is not tuple:
        return None
    for d in <tuple>out:
        if type(d) is not int or d < 0:
            return None
    return (out, src[1], src[2])


cdef object _convert(object op, list ins):
    """``convert_tensor.shape``: input 0's data in the dest format (4-D and up move C).

    Declined for a dest that is not an int naming NCHW, NHWC or NC4HW4 (the Python function
    raises for the others), and an input shape that is not a tuple of non-negative ints.
    """
    if not ins:
        return None
    param = op.param
    dest = getattr(param, "dest", None) if param is not None else None
    if type(dest) is not int:
        return None
    fmt = _DESTS.get(dest)
    if fmt is None:
        return None
    src = <tuple>ins[0]
    shape = src[0]
    if type(shape) is not tuple:
        return None
    cdef Py_ssize_t n = len(<tuple>shape)
    for d in <tuple>shape:
        if type(d) is not int or d < 0:
            return None
    src_nhwc = src[2] == _NHWC
    if n < 3 or src_nhwc == (fmt == _NHWC):
        return (shape, src[1], fmt)
    if src_nhwc:  # (N, *spatial, C) -> (N, C, *spatial)
        return ((shape[0], shape[n - 1], *shape[1 : n - 1]), src[1], fmt)
    return ((shape[0], *shape[2:], shape[1]), src[1], fmt)


cdef object _permute(object op, list ins):
    """``permute.shape``: input 0's dims permuted by the parameter's dims (none: reversed).

    Declined for dims that do not permute the rank (``permute.permutation`` raises then).
    """
    if not ins:
        return None
    src = <tuple>ins[0]
    shape = src[0]
    if type(shape) is not tuple:
        return None
    cdef Py_ssize_t i, d, n = len(<tuple>shape)
    cdef bint seen[MAX_RANK]
    if n > MAX_RANK:
        return None
    dims = getattr(op.param, "dims", None)
    if dims is None:
        return (shape[::-1], src[1], src[2])
    try:  # what int() refuses: the Python path raises
        perm = [int(v) for v in dims]
    except (TypeError, ValueError):
        return None
    if len(perm) != n:
        return None
    for i in range(n):
        seen[i] = False
    out = []
    for v in perm:
        if not 0 <= v < n:
            return None
        d = v
        if seen[d]:
            return None
        seen[d] = True
        out.append((<tuple>shape)[d])
    return (tuple(out), src[1], src[2])


cdef object _reshape(object op, list ins):
    """``reshape.shape`` of data by a known int32 / int64 shape input: (shape, dtype, format).

    Declined (None: ``compute_shape`` runs, and raises what it raises) for an NC4HW4 input read
    in NHWC order (``reshape.nhwc_order``), a shape input in NHWC (TensorFlow's literal zeros),
    an empty input, and every case the Python function refuses (dims that do not fit, a 0 past
    the input's rank, several -1). The data's values, when known, are folded after it as before.
    """
    if len(ins) != 2:
        return None
    src, dims_in = <tuple>ins[0], <tuple>ins[1]
    if dims_in[2] == _NHWC:
        return None
    if src[2] == _NC4HW4:  # reshape.nhwc_order: logical (NCHW) order unless dimType is NHWC
        if op.param_type != P_RESHAPE or op.param is None:
            return None
        dim_type = getattr(op.param, "dimType", None)
        if not isinstance(dim_type, int) or dim_type == _NHWC:
            return None
    dt = dims_in[1]
    if dt != _I32 and dt != _I64:
        return None
    shape = src[0]
    if type(shape) is not tuple:
        return None
    cdef Py_ssize_t i, n = len(<tuple>shape), m, free = -1
    cdef int64_t total = 1, known = 1, d
    for i in range(n):
        d = (<tuple>shape)[i]
        if d < 0 or d > _BIG:
            return None
        total *= d
        if total > _BIG:
            return None
    if total == 0:
        return None
    cdef Py_buffer view
    cdef int64_t out[MAX_RANK]
    if not _take(dims_in, &view):
        return None
    try:
        m = view.len // view.itemsize
        if m > MAX_RANK:
            return None
        for i in range(m):
            d = (<int32_t*>view.buf)[i] if view.itemsize == 4 else (<int64_t*>view.buf)[i]
            if d == 0:
                if i >= n:
                    return None
                d = (<tuple>shape)[i]
            elif d == -1:
                if free >= 0:
                    return None
                free = i
            elif d < -1 or d > _BIG:
                return None
            out[i] = d
            if d != -1:
                known *= d
                if known > _BIG:
                    return None
    finally:
        PyBuffer_Release(&view)
    if free >= 0:
        if known == 0:
            return None  # 0 elements: left to Python
        out[free] = total // known
        known *= out[free]
    if known != total:
        return None
    new = tuple([out[i] for i in range(m)])
    return (new, src[1], src[2])


cdef bint _one_index(tuple t, int64_t* v) except -1:
    """The one int32 / int64 value of input ``t`` (as ``_take``); False when not exactly one."""
    cdef Py_buffer view
    dt = t[1]
    if (dt != _I32 and dt != _I64) or not _take(t, &view):
        return False
    cdef bint ok = view.len == view.itemsize
    if ok:
        v[0] = (<int32_t*>view.buf)[0] if view.itemsize == 4 else (<int64_t*>view.buf)[0]
    PyBuffer_Release(&view)
    return ok


cdef object _slice_tf(list ins):
    """small_ints.small_slice_tf of a 1-D input: ``x[begin : begin + size]`` (size -1: to the end).

    Declined where ``slice_tf.region`` raises (out of the dim), and for other ranks.
    """
    if len(ins) != 3:
        return None
    src = <tuple>ins[0]
    shape = src[0]
    if type(shape) is not tuple or len(<tuple>shape) != 1:
        return None
    cdef int64_t dim = (<tuple>shape)[0], b, n
    if not _one_index(<tuple>ins[1], &b) or not _one_index(<tuple>ins[2], &n):
        return None
    b = b + dim if b < 0 else b
    n = dim - b if n == -1 else n
    if not 0 <= b <= dim or n < 0 or b + n > dim:
        return None
    cdef Py_buffer view
    if not _take(src, &view):
        return None
    try:
        if view.ndim != 1 or view.shape[0] != dim:
            return None
        value = _new((n,), src[1], <char*>view.buf + b * view.itemsize, n * view.itemsize)
    finally:
        PyBuffer_Release(&view)
    return ((n,), src[1], src[2], value)

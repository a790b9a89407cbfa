# cython: language_level=3
"""C twins of the per-unit and per-tensor loops of a resize: the same steps, without bytecode.

A first session creation walks every tensor and every unit several times (a thousand of each on
PyTorch exports): reset the read counts (``Pipeline.prepare``), count the reads of folded units,
fold the units that request no memory (``Unit.fold_quietly``), forget the last resize's memory
(``Session.resize``), bind the run steps (``Unit.bind``), make the session's tensors and units
(``Session.__init__``). Each function here does what its Python reference does, in the same order,
through the same attributes (the __slots__ of Tensor, TensorDescribe, Unit and UnitPlan read and
written in place, ``_slots.pxi``); ``tests/unit/test_unitfast.py`` compares them on random counts
and whole sessions. Anything that is not the plain case (a unit class with its own ``fold_quietly``)
calls the Python method; every call back into Python (``prepare``, a backend's hook) raises as
it would there.
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromVoidPtr
from cpython.object cimport PyObject, PyObject_GenericSetAttr

include "_slots.pxi"

# Tensor's, TensorDescribe's, Unit's and UnitPlan's slots, read and written in place (see
# _slots.pxi); learnt on the first call (mnnpy.unit and mnnpy.tensor import this module's users)
cdef bint _learnt = False
cdef object _Tensor = None, _Describe = None, _Unit = None, _Plan = None
cdef Py_ssize_t _T_DESCRIBE = -1, _T_SHAPE = -1, _T_DTYPE = -1, _T_FORMAT = -1, _T_HOST = -1
cdef Py_ssize_t _D_USE = -1, _D_SHAPE = -1, _D_BACKEND = -1, _D_CONTENT = -1, _D_USAGE = -1
cdef Py_ssize_t _D_STORAGE = -1, _D_INDEX = -1
cdef Py_ssize_t _U_OUTPUTS = -1, _U_INPUTS = -1, _U_PLAN = -1, _U_OP = -1, _U_EXECUTION = -1
cdef Py_ssize_t _U_BACKEND = -1, _U_PLACEMENT = -1, _U_SHAPED = -1
cdef Py_ssize_t _P_EXECUTION = -1, _P_BACKEND = -1, _D_NAME = -1
# TensorDescribe's dataclass fields as (offset, default, factory): what its generated __init__
# sets, slot by slot (``_new_describe``); None when its construction is not that plain.
cdef list _D_FIELDS = None


cdef void _learn() except *:
    global _learnt, _Tensor, _Describe, _Unit, _Plan, _T_DESCRIBE
    global _D_USE, _D_SHAPE, _D_BACKEND, _D_CONTENT, _D_USAGE, _U_OUTPUTS, _U_INPUTS, _U_PLAN
    global _P_EXECUTION, _P_BACKEND, _T_SHAPE, _T_DTYPE, _T_FORMAT, _T_HOST, _D_STORAGE, _D_INDEX
    global _U_OP, _U_EXECUTION, _U_BACKEND, _U_PLACEMENT, _U_SHAPED, _D_FIELDS, _D_NAME
    from mnnpy.tensor import Tensor, TensorDescribe
    from mnnpy.unit import Unit, UnitPlan

    _T_DESCRIBE, _T_HOST = slot_offset(Tensor, "describe"), slot_offset(Tensor, "host")
    _T_SHAPE, _T_DTYPE = slot_offset(Tensor, "shape"), slot_offset(Tensor, "dtype")
    _T_FORMAT = slot_offset(Tensor, "dimension_format")
    _D_STORAGE = slot_offset(TensorDescribe, "storage_type")
    _D_INDEX = slot_offset(TensorDescribe, "index")
    _U_OP, _U_EXECUTION = slot_offset(Unit, "op"), slot_offset(Unit, "execution")
    _U_BACKEND, _U_PLACEMENT = slot_offset(Unit, "backend"), slot_offset(Unit, "placement")
    _U_SHAPED = slot_offset(Unit, "_shaped")
    D = TensorDescribe
    _D_USE, _D_SHAPE = slot_offset(D, "use_count"), slot_offset(D, "shape_reads")
    _D_BACKEND, _D_CONTENT = slot_offset(D, "backend"), slot_offset(D, "content")
    _D_USAGE = slot_offset(D, "usage")
    _U_OUTPUTS, _U_INPUTS = slot_offset(Unit, "outputs"), slot_offset(Unit, "inputs")
    _U_PLAN = slot_offset(Unit, "plan")
    _P_EXECUTION, _P_BACKEND = slot_offset(UnitPlan, "execution"), slot_offset(UnitPlan, "backend")
    _Tensor, _Describe, _Unit, _Plan = Tensor, TensorDescribe, Unit, UnitPlan
    _D_FIELDS, _D_NAME = _describe_fields(D), slot_offset(D, "name")
    _learnt = True


cdef object _plain_fields(object cls):
    """A slotted dataclass's fields as ``(name, offset, default, factory)``, in order; None
    unless ``cls``'s ``__init__`` is its dataclass's own (no ``__post_init__``) and every field
    is an ``init`` slot. A field with neither default nor factory has ``dataclasses.MISSING``
    as both."""
    import dataclasses

    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return None
    init = getattr(cls, "__init__", None)
    if getattr(init, "__qualname__", "") != f"{_dataclass_owner(cls).__qualname__}.__init__":
        return None
    fields = []
    for f in dataclasses.fields(cls):
        off = slot_offset(cls, f.name)
        if off < 0 or not f.init:
            return None
        fields.append((f.name, off, f.default, f.default_factory))
    return fields


cdef object _describe_fields(object cls):
    """``_D_FIELDS`` for ``cls``: its plain fields (``_plain_fields``) as ``(offset, default,
    factory)``, each with a default or a factory; else None."""
    import dataclasses

    plain = _plain_fields(cls)
    if plain is None:
        return None
    fields = []
    for _, off, default, factory in plain:
        if default is not dataclasses.MISSING:
            fields.append((off, default, None))
        elif factory is not dataclasses.MISSING:
            fields.append((off, None, factory))
        else:
            return None
    return fields


cdef object _dataclass_owner(object cls):
    """The class in ``cls``'s MRO that defines its ``__init__``."""
    for base in cls.__mro__:
        if "__init__" in base.__dict__:
            return base
    return object


cdef object _new_describe(object describe_cls, object name, object index, object usage):
    """``describe_cls(name, index, usage)``: for TensorDescribe, its fields set slot by slot."""
    cdef tuple f
    if describe_cls is not _Describe or _D_FIELDS is None or _D_NAME < 0 or _D_INDEX < 0 \
            or _D_USAGE < 0:
        return describe_cls(name, index, usage)
    d = new_plain(describe_cls)
    for f in _D_FIELDS:
        factory = f[2]
        if factory is None:
            value = f[1]
        elif factory is dict:
            value = {}
        else:
            value = factory()
        _set_slot(d, <Py_ssize_t>f[0], value)
    _set_slot(d, _D_NAME, name)
    _set_slot(d, _D_INDEX, index)
    _set_slot(d, _D_USAGE, usage)
    return d


cdef inline object _describe(object t):
    """``t.describe``."""
    return slot_get(t, _Tensor, _T_DESCRIBE, "describe")


cdef inline object _dget(object d, Py_ssize_t off, str name):
    """``getattr(d, name)`` of a TensorDescribe."""
    return slot_get(d, _Describe, off, name)


cdef inline void _dset(object d, Py_ssize_t off, str name, object value) except *:
    """``setattr(d, name, value)`` of a TensorDescribe."""
    slot_set(d, _Describe, off, name, value)


def all_tensors(list units):
    """``Pipeline._all_tensors``: every tensor the units write or read, once, first met first."""
    cdef dict seen = {}
    if not _learnt:
        _learn()
    for u in units:
        for t in slot_get(u, _Unit, _U_OUTPUTS, "outputs"):
            seen[PyLong_FromVoidPtr(<void*>t)] = t
        for t in slot_get(u, _Unit, _U_INPUTS, "inputs"):
            seen[PyLong_FromVoidPtr(<void*>t)] = t
    return list(seen.values())


def reset_reads(list tensors, use_counts):
    """Each tensor's ``use_count`` from ``use_counts`` (by ``describe.index``); no shape reads."""
    if not _learnt:
        _learn()
    zero = 0
    for t in tensors:
        d = _describe(t)
        _dset(d, _D_USE, "use_count", use_counts[d.index])
        _dset(d, _D_SHAPE, "shape_reads", zero)


def count_shape_reads(list units, done):
    """Per unit whether its id is in ``done`` (it folded); a shape read of each folded input."""
    cdef list flags = []
    if not _learnt:
        _learn()
    for u in units:
        fold = PyLong_FromVoidPtr(<void*>u) in done
        flags.append(fold)
        if fold:
            for t in slot_get(u, _Unit, _U_INPUTS, "inputs"):
                d = _describe(t)
                _dset(d, _D_SHAPE, "shape_reads", _dget(d, _D_SHAPE, "shape_reads") + 1)
    return flags


cdef object _folded_plan(unit, host, plan_cls):
    """``Unit._folded_plan``: the last plan again when it is folded on ``host``, else a new one."""
    last = slot_get(unit, _Unit, _U_PLAN, "plan")
    if (
        last is not None
        and slot_get(last, _Plan, _P_EXECUTION, "execution") is None
        and slot_get(last, _Plan, _P_BACKEND, "backend") is host
    ):
        return last
    plan = new_plain(plan_cls)  # a frozen dataclass: its slots set as object's are
    PyObject_GenericSetAttr(plan, "execution", None)
    PyObject_GenericSetAttr(plan, "backend", host)
    PyObject_GenericSetAttr(plan, "inputs", tuple(unit.inputs))
    PyObject_GenericSetAttr(plan, "copies", ())
    PyObject_GenericSetAttr(plan, "made_info", None)
    PyObject_GenericSetAttr(plan, "reads_through", ())
    PyObject_GenericSetAttr(plan, "edges", ())
    return plan


def fold_quietly(unit, host, plan_cls):
    """``Unit.fold_quietly(host)``: the folded plan when no memory is requested, else None."""
    if not _learnt:
        _learn()
    for t in slot_get(unit, _Unit, _U_OUTPUTS, "outputs"):
        d = _describe(t)
        if _dget(d, _D_USE, "use_count") > _dget(d, _D_SHAPE, "shape_reads"):
            return None
    inputs = slot_get(unit, _Unit, _U_INPUTS, "inputs")
    n = len(inputs)
    for t in inputs:
        d = _describe(t)
        if _dget(d, _D_USE, "use_count") <= n and _dget(d, _D_BACKEND, "backend") is not None:
            return None
    for t in inputs:
        d = _describe(t)
        _dset(d, _D_SHAPE, "shape_reads", _dget(d, _D_SHAPE, "shape_reads") - 1)
        _dset(d, _D_USE, "use_count", _dget(d, _D_USE, "use_count") - 1)
    return _folded_plan(unit, host, plan_cls)


def prepare_units(list units, list flags, host, prepare, quiet, plan_cls, direct=None):
    """``Pipeline.prepare``'s loop: each unit's plan, quietly folded or ``prepare(unit, fold)``.

    ``quiet`` is ``Unit.fold_quietly``: a unit whose class has its own is asked through it.
    ``direct``, when not None, is what ``Pipeline._prepare_unit`` does for a plain unit with one
    backend whose ``resize_scope`` is the base one: ``(unit class, that backend, geometry by
    unit id, prepare_unit's kit, error)``. Such a unit is then prepared here, its op set as the
    backend's scope around :func:`prepare_unit` and put back after, and an exception raised
    ``from`` as there: ``error(e, unit)`` (the MNNError naming the op), chained to ``e`` unless
    ``e`` is an MNNError itself (``mnn_error``, the class, is the last item). Every other unit
    goes through ``prepare``.
    Returns the units that run (their plan has an execution).
    """
    cdef list active = []
    cdef Py_ssize_t i, n = len(units)
    cdef object unit_cls = None, scope = None, geometry = None, kit = None, error = None
    cdef object mnn_error = None
    if len(flags) != n:
        raise ValueError(f"{len(flags)} fold flags for {n} units")
    if direct is not None:
        unit_cls, scope, geometry, kit, error, mnn_error = direct
    for i in range(n):
        unit, fold = units[i], flags[i]
        plan = None
        if fold:
            if type(unit).fold_quietly is quiet:
                plan = fold_quietly(unit, host, plan_cls)
            else:
                plan = unit.fold_quietly(host)
        if plan is None:
            if unit_cls is not None and type(unit) is unit_cls:
                plan = _prepare_direct(unit, fold, scope, geometry, kit, error, mnn_error)
            else:
                plan = prepare(unit, fold)
        unit.plan = plan
        if plan.execution is not None:
            active.append(unit)
    return active


cdef object _prepare_direct(unit, fold, scope, dict geometry, tuple kit, error, mnn_error):
    """``Pipeline._prepare_unit`` for a plain unit with one base-scoped backend (see above)."""
    try:
        outer = scope._scope_op
        scope._scope_op = unit.op
        try:
            return prepare_unit(unit, fold, geometry.get(PyLong_FromVoidPtr(<void*>unit)), kit)
        finally:
            scope._scope_op = outer
    except Exception as e:
        wrapped = error(e, unit)
        if isinstance(e, mnn_error):
            raise wrapped from None
        raise wrapped from e


def reset_tensors(list tensors, known, acquire, storage, input_usage, constant_usage):
    """``Session.resize``'s first loop: no memory, no owner; inputs and constants keep theirs.

    Inputs and constants keep their shapes and get host memory again (``acquire(t, storage)``);
    every other tensor's shape starts over, its content the one ``known`` has for its index.
    """
    if not _learnt:
        _learn()
    empty = ()
    for t in tensors:
        d = _describe(t)
        usage = _dget(d, _D_USAGE, "usage")
        slot_set(t, _Tensor, _T_HOST, "host", None)
        _dset(d, _D_BACKEND, "backend", None)
        _dset(d, _D_STORAGE, "storage_type", None)
        if usage != constant_usage:
            _dset(d, _D_CONTENT, "content", known.get(_dget(d, _D_INDEX, "index")))
        if usage == input_usage or usage == constant_usage:
            acquire(t, storage)
        else:
            slot_set(t, _Tensor, _T_SHAPE, "shape", empty)


def unchecked_memory(tensors, ndarray):
    """The tensors of ``tensors`` that ``contract.check_memory`` must look at itself.

    Those held in host memory (their owner's ``memory_kind`` is "host") whose ``host`` is not an
    ``ndarray`` of their dtype with at least ``storage_elements`` elements; usually none.
    """
    cdef list bad = []
    cdef Py_ssize_t size
    if not _learnt:
        _learn()
    for t in tensors:
        owner = _dget(_describe(t), _D_BACKEND, "backend")
        if owner is None or owner.memory_kind != "host":
            continue
        host = slot_get(t, _Tensor, _T_HOST, "host")
        if type(host) is ndarray:
            dtype = host.dtype
            tdtype = slot_get(t, _Tensor, _T_DTYPE, "dtype")
            if dtype is tdtype or dtype == tdtype:
                size = host.size
                # the NC4HW4-padded count bounds storage_elements in every layout: asked first,
                # without the backend's storage_format
                shape = slot_get(t, _Tensor, _T_SHAPE, "shape")
                if size >= _padded_elements(shape) or size >= t.storage_elements:
                    continue
        bad.append(t)
    return bad


cdef Py_ssize_t _padded_elements(shape) except? -1:
    """Elements of ``shape`` stored NC4HW4 (channels, axis 1, padded to four): an upper bound."""
    cdef Py_ssize_t i, n = len(shape), count
    if n == 0:
        return 1
    count = shape[0]
    if n >= 2:
        count *= (<Py_ssize_t>shape[1] + 3) // 4 * 4
    for i in range(2, n):
        count *= <Py_ssize_t>shape[i]
    return count


def make_units(ops, tensors, unit_cls):
    """``[unit_cls(op, [tensors[i] ...inputs], [tensors[i] ...outputs]) for op in ops]``.

    ``unit_cls`` is ``Unit``: each made by ``__new__``, its slots set as ``Unit.__init__`` sets
    them (tests/unit/test_unitfast.py compares them slot by slot).
    """
    cdef list units = []
    cdef list ts = tensors
    if not _learnt:
        _learn()
    for op in ops:
        u = new_plain(unit_cls)
        slot_set(u, _Unit, _U_OP, "op", op)
        slot_set(u, _Unit, _U_INPUTS, "inputs", [ts[i] for i in op.inputs])
        slot_set(u, _Unit, _U_OUTPUTS, "outputs", [ts[i] for i in op.outputs])
        slot_set(u, _Unit, _U_EXECUTION, "execution", None)
        slot_set(u, _Unit, _U_BACKEND, "backend", None)
        slot_set(u, _Unit, _U_PLACEMENT, "placement", None)
        slot_set(u, _Unit, _U_PLAN, "plan", None)
        slot_set(u, _Unit, _U_SHAPED, "_shaped", None)
        units.append(u)
    return units


def model_tensors(infos, tensor_cls, describe_cls, dtype, fmt):
    """``tensor.model_tensors(infos)``: one plain tensor per info, made slot by slot.

    Each is ``tensor_cls.__new__``'s with shape ``()``, ``dtype``, ``fmt`` and no memory, and
    ``describe_cls(info.name, info.index, info.usage)`` (tests compare with the reference).
    """
    cdef list tensors = []
    shape = ()
    if not _learnt:
        _learn()
    for info in infos:
        t = new_plain(tensor_cls)
        slot_set(t, _Tensor, _T_SHAPE, "shape", shape)
        slot_set(t, _Tensor, _T_DTYPE, "dtype", dtype)
        slot_set(t, _Tensor, _T_FORMAT, "dimension_format", fmt)
        slot_set(t, _Tensor, _T_HOST, "host", None)
        d = _new_describe(describe_cls, info.name, info.index, info.usage)
        slot_set(t, _Tensor, _T_DESCRIBE, "describe", d)
        tensors.append(t)
    return tensors


def bind_unit(unit, check_memory, ndarray, step_cls):
    """``Unit.bind()`` of a plain unit: its run step, or None to leave it out.

    ``check_memory`` (``contract.check_memory``) is called only for the tensors that
    :func:`unchecked_memory` finds: it raises naming the backend and the tensor.
    """
    plan = unit.plan
    ex = None if plan is None else plan.execution
    if plan is None or ex is None:
        return None
    inputs, outs = plan.inputs, unit.outputs
    tensors = [*inputs, *outs]
    if unchecked_memory(tensors, ndarray):  # a host-memory backend kept its word
        check_memory(tensors)
    copies = plan.copies
    if not copies and ex.idle(inputs, outs):
        return None
    outputs = tuple(outs)
    call = ex.bind(inputs, outputs)
    edges = plan.edges
    syncs = tuple([e.sync for e in edges if e.sync is not None]) if edges else ()
    step = new_plain(step_cls)  # a frozen dataclass: its slots set as object's are
    PyObject_GenericSetAttr(step, "copies", copies)
    PyObject_GenericSetAttr(step, "call", call)
    PyObject_GenericSetAttr(step, "execution", ex)
    PyObject_GenericSetAttr(step, "inputs", inputs)
    PyObject_GenericSetAttr(step, "outputs", outputs)
    PyObject_GenericSetAttr(step, "unit", unit)
    PyObject_GenericSetAttr(step, "syncs", syncs)
    return step


cdef inline object _storage(object d, object survive, object separate, object dynamic):
    """``unit.storage_type_of``: DYNAMIC_SEPERATE for a known value or a surviving usage."""
    if _dget(d, _D_CONTENT, "content") is not None or _dget(d, _D_USAGE, "usage") in survive:
        return separate
    return dynamic


def prepare_unit(unit, bint folded, geometry, tuple kit):
    """``unit.prepare(host, preference, overrides, strict, folded=..., geometry=...)`` of a Unit.

    ``kit`` is ``unit.prepare_kit(...)``'s: the session's arguments and the functions the
    method calls (``place``, ``runnable``, ``fall_back``, the contract's ``acquire_buffer`` /
    ``release_buffer``, ...), called here in the same order with the same arguments; only the
    method's own steps (storage types, read counts, the plan's slots) are done in C.
    """
    (host, preference, overrides, strict, place, runnable, fall_back, acquire, release,
     partial, op_info, plan_cls, logger, debug, survive, dynamic, separate) = kit
    if not _learnt:
        _learn()
    cdef list outs = slot_get(unit, _Unit, _U_OUTPUTS, "outputs")
    cdef list ins = slot_get(unit, _Unit, _U_INPUTS, "inputs")
    if folded:
        for t in outs:  # memory only where an unfolded op reads it (Unit.prepare)
            d = _describe(t)
            if _dget(d, _D_USE, "use_count") > _dget(d, _D_SHAPE, "shape_reads"):
                acquire(host, t, _storage(d, survive, separate, dynamic))
        for t in ins:
            d = _describe(t)
            _dset(d, _D_SHAPE, "shape_reads", _dget(d, _D_SHAPE, "shape_reads") - 1)
            left = _dget(d, _D_USE, "use_count") - 1
            _dset(d, _D_USE, "use_count", left)
            if left == 0 and _dget(d, _D_BACKEND, "backend") is not None:
                release(d.backend, t, _storage(d, survive, separate, dynamic))
        return _folded_plan(unit, host, plan_cls)
    op = unit.op
    if unit.execution is None:  # executions (and their weights) outlive resizes
        unit.execution, unit.backend, unit.placement = place(
            op, ins, outs, preference, overrides, strict
        )
    execution, backend = unit.execution, unit.backend
    assert backend is not None
    for t in ins:
        if _dget(_describe(t), _D_BACKEND, "backend") is not backend:
            inputs, copies, edges = unit._wrap_inputs(backend)
            break
    else:  # every input held by ``backend`` (the common case): read in place
        inputs, copies, edges = tuple(ins), (), ()
    runs = geometry if geometry and runnable(geometry, execution, backend, copies) else None
    if runs is None:  # no regions decided, or not runnable as decided
        fall_back(geometry, outs, execution)
    outputs = outs
    if execution.support_inplace and not copies and unit._can_reuse_input(execution):
        if backend.on_acquire_inplace(outs[0], ins[0]):
            outputs = outs[1:]
    for t in outputs:
        acquire(backend, t, _storage(_describe(t), survive, separate, dynamic))
    execution.on_resize(inputs, outs)
    for _, _, mirror in copies:  # like scratch: valid during this op's execute
        release(backend, mirror, dynamic)
    for ts in (ins, geometry.sources if geometry is not None else ()):  # _release_inputs
        for t in ts:
            d = _describe(t)
            left = _dget(d, _D_USE, "use_count") - 1
            _dset(d, _D_USE, "use_count", left)
            if left == 0 and _dget(d, _D_BACKEND, "backend") is not None:
                release(d.backend, t, _storage(d, survive, separate, dynamic))
    if logger.isEnabledFor(debug):
        logger.debug("prepared %s %r on %s", op.type_name, op.name, backend.name)
    through = runs.reads_through if runs is not None else ()
    plan = new_plain(plan_cls)  # a frozen dataclass: its slots set as object's are
    PyObject_GenericSetAttr(plan, "execution", execution)
    PyObject_GenericSetAttr(plan, "backend", backend)
    PyObject_GenericSetAttr(plan, "inputs", inputs)
    PyObject_GenericSetAttr(plan, "copies", copies)
    PyObject_GenericSetAttr(plan, "made_info", partial(op_info, op, ins, outs, backend))
    PyObject_GenericSetAttr(plan, "reads_through", through)
    PyObject_GenericSetAttr(plan, "edges", edges)
    return plan


def scan_ops(ops, Py_ssize_t n, sources):
    """``unit_loops.scan_ops_python``: the ops that run, each tensor's reads, the source ops.

    None when an op reads a tensor no earlier op wrote, writes one written before, or names
    an index outside ``0..n-1``: ``schedule`` then walks the ops itself and raises.
    """
    cdef bytearray seen = bytearray(n)
    cdef unsigned char[:] written = seen
    cdef list reads = [0] * n, runs = [], sourced = []
    cdef Py_ssize_t i
    for op in ops:
        ins = op.inputs
        for x in ins:
            i = x
            if i < 0 or i >= n or not written[i]:
                return None
        for x in op.outputs:
            i = x
            if i < 0 or i >= n or written[i]:
                return None
            written[i] = 1
        if op.type in sources:
            sourced.append(op)
        else:
            runs.append(op)
            for x in ins:
                i = x
                reads[i] = <object>reads[i] + 1
    return runs, reads, sourced


# -- Tensor's accessors (``tensor.py`` makes these its properties when built) ------------------
# Asked thousands of times per session creation (a Python property costs a frame each). Set by
# ``tensor_accessors``: the set of backend classes that keep the base ``storage_format``, the
# Python ``_format_of``, NC4HW4, and the Python ``buffer`` getter (which raises when unset).
cdef object _KEEPS = None, _FORMAT_OF = None, _NC4 = None, _FORMAT_CLS = None, _BUFFER_PY = None


def tensor_accessors(keeps, format_of, nc4hw4, buffer_py):
    """Learn what the accessors below read; ``tensor.py`` calls this once."""
    global _KEEPS, _FORMAT_OF, _NC4, _FORMAT_CLS, _BUFFER_PY
    _KEEPS, _FORMAT_OF, _NC4, _FORMAT_CLS = keeps, format_of, nc4hw4, type(nc4hw4)
    _BUFFER_PY = buffer_py


cdef inline object _stored(object t):
    """``tensor._stored_format(t)``."""
    if not _learnt:
        _learn()
    backend = _dget(_describe(t), _D_BACKEND, "backend")
    if backend is None:
        return slot_get(t, _Tensor, _T_FORMAT, "dimension_format")
    if type(backend) in _KEEPS and "storage_format" not in backend.__dict__:
        return slot_get(t, _Tensor, _T_FORMAT, "dimension_format")
    return _FORMAT_OF(backend, t)


cdef inline bint _is_nc4(object fmt) except -1:
    """``fmt == NC4HW4`` (identity for the enum's own members)."""
    if fmt is _NC4:
        return True
    if type(fmt) is _FORMAT_CLS:
        return False
    return fmt == _NC4


def stored_format(t):
    """``tensor._stored_format(t)``: the format the owning backend stores ``t`` in."""
    return _stored(t)


def is_packed(t):
    """``Tensor.is_packed``: NC4HW4 storage of at least two dimensions."""
    return _is_nc4(_stored(t)) and len(slot_get(t, _Tensor, _T_SHAPE, "shape")) >= 2


cdef object _elements(object t):
    """``Tensor.storage_elements`` (Python ints throughout, as ``math.prod``)."""
    cdef Py_ssize_t i, n
    cdef long long v, total = 1
    cdef int overflow = 0
    shape = slot_get(t, _Tensor, _T_SHAPE, "shape")
    packed = _is_nc4(_stored(t)) and len(shape) >= 2
    if type(shape) is tuple:
        n = len(shape)
        for i in range(n):
            item = (<tuple>shape)[i]
            if type(item) is not int:
                break
            v = PyLong_AsLongLongAndOverflow(item, &overflow)
            if overflow:  # a huge one: the Python product below
                break
            if packed and i == 1:
                v = (v + 3) // 4 * 4
            if v < 0 or (v and total > 0x7FFFFFFFFFFFFFFF // v):
                break
            total *= v
        else:
            return total
    if packed:
        return shape[0] * ((shape[1] + 3) // 4) * 4 * _prod(shape[2:])
    return _prod(shape)


cdef object _prod(object values):
    """``math.prod(values)``."""
    out = 1
    for v in values:
        out = out * v
    return out


def storage_elements(t):
    """``Tensor.storage_elements``: elements of its storage (NC4HW4 channels padded to 4)."""
    return _elements(t)


def storage_size(t):
    """``Tensor.size``: bytes of its storage (a subclass's own ``storage_elements`` is asked)."""
    if not _learnt:
        _learn()
    if type(t) is not _Tensor:
        return t.storage_elements * t.dtype.itemsize
    return _elements(t) * slot_get(t, _Tensor, _T_DTYPE, "dtype").itemsize


def buffer(t):
    """``Tensor.buffer``: its storage array (the Python getter raises when there is none)."""
    if not _learnt:
        _learn()
    host = slot_get(t, _Tensor, _T_HOST, "host")
    return _BUFFER_PY(t) if host is None else host


def save_states(units):
    """``unit_loops.save_states_python``: each output once, with its state as a tuple."""
    cdef dict seen = {}
    cdef list saved = []
    if not _learnt:
        _learn()
    for u in units:
        for t in slot_get(u, _Unit, _U_OUTPUTS, "outputs"):
            key = PyLong_FromVoidPtr(<void*>t)
            if key in seen:
                continue
            seen[key] = t
            d = _describe(t)
            state = (slot_get(t, _Tensor, _T_SHAPE, "shape"),
                     slot_get(t, _Tensor, _T_DTYPE, "dtype"),
                     slot_get(t, _Tensor, _T_FORMAT, "dimension_format"),
                     slot_get(t, _Tensor, _T_HOST, "host"), _dget(d, _D_CONTENT, "content"),
                     _dget(d, _D_BACKEND, "backend"), _dget(d, _D_STORAGE, "storage_type"))
            saved.append((t, state))
    return saved


def restore_states(saved, bint shaped):
    """``unit_loops.restore_states_python``: the saved states back (some of them, ``shaped``)."""
    cdef tuple state
    if not _learnt:
        _learn()
    for t, state in saved:
        d = _describe(t)
        if not shaped:
            slot_set(t, _Tensor, _T_SHAPE, "shape", state[0])
            slot_set(t, _Tensor, _T_DTYPE, "dtype", state[1])
            slot_set(t, _Tensor, _T_FORMAT, "dimension_format", state[2])
        slot_set(t, _Tensor, _T_HOST, "host", state[3])
        if not shaped:
            _dset(d, _D_CONTENT, "content", state[4])
        _dset(d, _D_BACKEND, "backend", state[5])
        _dset(d, _D_STORAGE, "storage_type", state[6])


# TensorInfo's slots (index, name, usage, use_count), learnt by ``tensor_infos`` for its class
cdef object _INFO_CLS = None
cdef Py_ssize_t _I_OFFS[4]


cdef bint _info_plain(object cls) except -1:
    """Whether ``cls`` is a plain slotted dataclass (``_plain_fields``) of exactly the fields
    index, name, usage, use_count; their offsets are then learnt."""
    global _INFO_CLS
    if cls is _INFO_CLS:
        return True
    plain = _plain_fields(cls)
    if plain is None or [f[0] for f in plain] != ["index", "name", "usage", "use_count"]:
        return False
    for k in range(4):  # all four valid (``_plain_fields``): the learnt offsets change together
        _I_OFFS[k] = plain[k][1]
    _INFO_CLS = cls
    return True


def tensor_infos(cls, names_in, usage, reads_in):
    """``unit_loops.tensor_infos_python``: ``cls(i, names[i], usage, reads[i])`` per tensor,
    its four slots set in place when ``cls`` is a plain slotted dataclass of those fields."""
    cdef list names = names_in if type(names_in) is list else list(names_in)
    cdef list reads = reads_in if type(reads_in) is list else list(reads_in)
    cdef Py_ssize_t i, n = len(names)
    cdef list out
    if len(reads) != n:
        raise ValueError(f"{len(reads)} read counts for {n} tensors")
    if not _info_plain(cls):
        return [cls(i, names[i], usage, reads[i]) for i in range(n)]
    out = [None] * n
    for i in range(n):
        info = new_plain(cls)
        _set_slot(info, _I_OFFS[0], i)
        _set_slot(info, _I_OFFS[1], names[i])
        _set_slot(info, _I_OFFS[2], usage)
        _set_slot(info, _I_OFFS[3], reads[i])
        out[i] = info
    return out


def late_readers(list units, suspects):
    """``unit_loops.late_readers_python``: each tensor's writer index, and the late readers."""
    cdef dict made = {}
    cdef set late = set()
    cdef Py_ssize_t i, n = len(units)
    if not _learnt:
        _learn()
    for i in range(n):
        for t in slot_get(units[i], _Unit, _U_OUTPUTS, "outputs"):
            made[t] = i
    for i in range(n):
        u = units[i]
        if suspects is not None and PyLong_FromVoidPtr(<void*>u) not in suspects:
            continue
        for t in slot_get(u, _Unit, _U_INPUTS, "inputs"):
            w = made.get(t)
            if w is not None and <Py_ssize_t>w > i:
                late.add(i)
    return made, late

# cython: language_level=3
"""The op list of a model read in C: ``net._build_op`` over ``net_lean._lean_ops`` in one pass.

Every offset, vtable, vector and string is checked against the buffer before it is read; anything
out of range (or a table the reader does not know) raises ``ValueError``, and ``net.load_net`` then
reads the bytes with the generated object API, which names the broken field. The bytes are read
little-endian (the FlatBuffers wire format); ``net`` uses this module on little-endian hosts only.
"""

from cpython.buffer cimport PyBuffer_FillInfo
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.errno cimport EINTR, errno
from posix.fcntl cimport O_RDONLY, openat
from posix.mman cimport MAP_FAILED, MAP_PRIVATE, PROT_READ, munmap
from posix.mman cimport mmap as c_mmap
from posix.unistd cimport close as c_close
from posix.unistd cimport read as c_read
from cpython.long cimport PyLong_FromLong
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int32_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memcmp, memcpy, memmove, strlen

cdef enum:
    MAX_FIELDS = 32

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    #include <stdint.h>
    #if defined(__linux__) && defined(MAP_POPULATE)
    #define MNNPY_MAP_POPULATE MAP_POPULATE
    #else
    #define MNNPY_MAP_POPULATE 0
    #endif
    /* Transparent huge pages for the 2 MiB-aligned inside of [p, p + n) (Linux), as NumPy asks
       for its large arrays: a file's bytes then fault in a few 2 MiB pages, not one per 4 KiB. */
    static void mnnpy_advise_huge(char *p, Py_ssize_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        const uintptr_t huge = (uintptr_t)2 << 20;
        uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
        uintptr_t hi = ((uintptr_t)p + (uintptr_t)n) & ~(huge - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }
    """
    void mnnpy_advise_huge(char* p, Py_ssize_t n) nogil
    int MNNPY_MAP_POPULATE  # MAP_POPULATE on Linux, else 0 (pages then mapped at first touch)


include "_slots.pxi"


cdef extern from "Python.h":
    int PyObject_GenericSetDict(object o, object value, void* context) except -1
    int PyObject_GenericSetAttr(object o, object name, object value) except -1


cdef inline object _with_dict(object cls, dict d):
    """``obj = object.__new__(cls); obj.__dict__ = d`` (in C when ``cls`` is a plain class)."""
    obj = _c_object_new(cls)  # _slots.pxi: object's tp_new, or NotImplemented
    if obj is NotImplemented:
        obj = object.__new__(cls)
        obj.__dict__ = d
        return obj
    PyObject_GenericSetDict(obj, d, NULL)  # what ``obj.__dict__ = d`` ends in
    return obj


cdef extern from "<dirent.h>" nogil:
    ctypedef struct DIR
    struct dirent:
        char d_name[1]
    DIR* opendir(const char* name)
    dirent* readdir(DIR* d)
    int closedir(DIR* d)
    int dirfd(DIR* d)

cdef extern from "<string.h>" nogil:
    void* memmem(const void* hay, size_t n, const void* needle, size_t k)

cdef enum:
    SCAN_CHUNK = 16384
    NAME_MAX_BYTES = 4096

cdef bint _metadata_dir(const char* name, size_t n) noexcept nogil:
    return (n >= 10 and memcmp(name + n - 10, b".dist-info", 10) == 0) or (
        n >= 9 and memcmp(name + n - 9, b".egg-info", 9) == 0
    )


cdef bint _file_has(int fd, const char* needle, size_t k, char* buf) noexcept nogil:
    """Whether the file ``fd``, read to its end, holds the ``k`` bytes of ``needle``.

    ``buf`` has room for ``SCAN_CHUNK + k`` bytes: the last ``k - 1`` bytes of a read stay in
    front of the next, so a needle across two reads is found.
    """
    cdef size_t kept = 0, have
    cdef Py_ssize_t got
    while True:
        got = c_read(fd, buf + kept, SCAN_CHUNK)
        if got < 0 and errno == EINTR:
            continue
        if got <= 0:
            return False
        have = kept + <size_t>got
        if memmem(buf, have, needle, k) != NULL:
            return True
        kept = min(k - 1, have)
        memmove(buf, buf + have - kept, kept)


def scan_entry_points(bytes folder, bytes needle):
    """Whether an ``entry_points.txt`` of a ``*.dist-info`` / ``*.egg-info`` folder in
    ``folder`` (a file-system path) contains ``needle``: 1 yes, 0 no, -1 ``folder`` cannot be
    opened as a directory (``errno`` is not kept: the caller looks at the path).

    ``plugins._may_declare`` per ``sys.path`` entry, without a Python object per entry: on a
    few hundred installed distributions 0.6 ms instead of 1.5 (a fresh process).
    """
    cdef const char* nd = needle
    cdef size_t k = len(needle)
    cdef DIR* d
    cdef dirent* e
    cdef int fd, dfd
    cdef bint found = False
    cdef size_t n
    cdef char buf[SCAN_CHUNK + NAME_MAX_BYTES]
    cdef char path[NAME_MAX_BYTES + 32]
    if k == 0 or k >= NAME_MAX_BYTES:
        raise ValueError(f"needle of {k} bytes: 1 to {NAME_MAX_BYTES - 1} expected")
    d = opendir(folder)
    if d == NULL:
        return -1
    with nogil:
        dfd = dirfd(d)
        while not found:
            e = readdir(d)
            if e == NULL:
                break
            n = strlen(e.d_name)
            if n > NAME_MAX_BYTES or not _metadata_dir(e.d_name, n):
                continue
            memcpy(path, e.d_name, n)
            memcpy(path + n, b"/entry_points.txt", 18)
            fd = openat(dfd, path, O_RDONLY)
            if fd < 0:
                continue
            found = _file_has(fd, nd, k, buf)
            c_close(fd)
        closedir(d)
    return 1 if found else 0


def read_file(int fd, Py_ssize_t size):
    """Up to ``size`` bytes read from file descriptor ``fd`` (fewer at end of file), as bytes.

    The bytes object is made first and read into, its memory advised for huge pages: a model
    file of many MiB costs a few page faults instead of one per 4 KiB page (``f.read()``).
    Measured (fresh processes, CPU ms, median of 30-45): resnet18 (45 MiB) 18-20 with the
    advice, 27-30 without; transformer_pt (12 MiB) 5.8 / 8.4. Both ways have occasional
    40-110 ms outliers on a VM that hands free memory back to its host (with the advice the
    larger ones, in 2 of 4 runs), and the kernel counted no compaction stall; prefaulting the
    range first (``MADV_POPULATE_WRITE``) did not avoid them. The medians win: it stays.

    Raises:
        OSError: the read failed.
    """
    if size < 0:
        raise ValueError(f"negative size {size}")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t got = 0, k = 0
    cdef int err = 0
    with nogil:
        mnnpy_advise_huge(p, size)
        while got < size:
            k = c_read(fd, p + got, <size_t>(size - got))
            if k < 0 and errno == EINTR:
                continue
            if k <= 0:
                err = errno if k < 0 else 0
                break
            got += k
    if k < 0:
        raise OSError(err, f"read failed after {got} of {size} bytes")
    return out if got == size else out[:got]


cdef class MappedFile:
    """A file mapped read-only (``PROT_READ``, ``MAP_PRIVATE``): its bytes without a copy.

    Made by :func:`map_file`. It exports a read-only buffer (``memoryview``, ``np.frombuffer``,
    ``struct.unpack_from``) and reads like ``bytes`` where the model readers use it: ``len``,
    an index (an int), a slice (a ``bytes`` copy of those bytes) and ``startswith``. Every
    buffer taken from it keeps it alive; the mapping is released when the last is gone (there
    is no ``close``, which could pull the memory from under a live NumPy view). The file
    descriptor is not kept. Its size is the file's when mapped: nothing reads past it.
    """

    cdef const uint8_t* p
    cdef Py_ssize_t n

    def __dealloc__(self):
        if self.p != NULL:
            munmap(<void*>self.p, <size_t>self.n)
            self.p = NULL

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, <void*>self.p, self.n, 1, flags)  # read-only

    def __len__(self):
        return self.n

    def __getitem__(self, key):
        cdef Py_ssize_t i, start, stop, step
        if isinstance(key, slice):
            start, stop, step = key.indices(self.n)
            if step != 1:
                return bytes(memoryview(self)[key])
            return PyBytes_FromStringAndSize(<const char*>self.p + start, max(0, stop - start))
        i = key
        if i < 0:
            i += self.n
        if i < 0 or i >= self.n:
            raise IndexError("index out of range")
        return self.p[i]

    def startswith(self, bytes prefix):
        """Whether the bytes begin with ``prefix`` (as ``bytes.startswith``)."""
        cdef Py_ssize_t k = len(prefix)
        return k <= self.n and memcmp(self.p, <const char*>prefix, k) == 0

    @property
    def address(self):
        """Where the mapping starts in this process's memory (for the tests)."""
        return <size_t>self.p


def map_file(int fd, Py_ssize_t size, bint populate=False):
    """The first ``size`` bytes (``size`` > 0) of the file ``fd`` mapped read-only, or None.

    None when the kernel refuses the mapping (a pipe, a character device, a file system
    without ``mmap``): the caller then reads the file. ``fd`` may be closed afterwards.
    ``populate``: every page is mapped now (``MAP_POPULATE``, one call), not at its first
    touch. For a model file, whose weights a session packs: measured in fresh processes
    (CPU ms, medians of 11, Interpreter + first session) 0.3-0.6 ms less on shufflenet_v2,
    audio_encoder, transformer_pt and llama_decoder, the same on shufflenet_v2_pt and
    convnext_atto (lazy faults cost more than the one call that maps them all).
    """
    if size <= 0:
        raise ValueError(f"cannot map {size} bytes")
    cdef void* p
    cdef int flags = MAP_PRIVATE | (MNNPY_MAP_POPULATE if populate else 0)
    with nogil:
        p = c_mmap(NULL, <size_t>size, PROT_READ, flags, fd, 0)
    if p == MAP_FAILED:
        return None
    cdef MappedFile m = MappedFile.__new__(MappedFile)
    m.p = <const uint8_t*>p
    m.n = size
    return m


cdef class _Buf:
    cdef const uint8_t* p
    cdef Py_ssize_t n
    cdef object data

    def __cinit__(self, object data):
        self.data = data
        if type(data) is bytes:
            self.p = <const uint8_t*>PyBytes_AS_STRING(data)
            self.n = PyBytes_GET_SIZE(data)
        elif type(data) is MappedFile:
            self.p = (<MappedFile>data).p
            self.n = (<MappedFile>data).n
        else:
            raise TypeError(f"model bytes or a MappedFile expected, got {type(data).__name__}")

    cdef inline int check(self, Py_ssize_t at, Py_ssize_t size) except -1:
        if at < 0 or size < 0 or at > self.n - size:
            raise ValueError(f"read of {size} bytes at {at} outside the {self.n}-byte model")
        return 0

    cdef inline uint32_t u32(self, Py_ssize_t at) except? 0xFFFFFFFF:
        cdef uint32_t v
        self.check(at, 4)
        memcpy(&v, self.p + at, 4)
        return v

    cdef inline int32_t i32(self, Py_ssize_t at) except? -1:
        cdef int32_t v
        self.check(at, 4)
        memcpy(&v, self.p + at, 4)
        return v

    cdef inline uint16_t u16(self, Py_ssize_t at) except? 0xFFFF:
        cdef uint16_t v
        self.check(at, 2)
        memcpy(&v, self.p + at, 2)
        return v

    cdef inline int8_t i8(self, Py_ssize_t at) except? -1:
        self.check(at, 1)
        return <int8_t>self.p[at]

    cdef int slots(self, Py_ssize_t pos, int n, Py_ssize_t* out) except -1:
        """The absolute positions of a table's first ``n`` fields (0: absent), as Table.Offset."""
        cdef Py_ssize_t vtable = pos - self.i32(pos)
        cdef uint16_t end, o
        cdef int i
        self.check(vtable, 4)
        end = self.u16(vtable)
        for i in range(n):
            o = self.u16(vtable + 4 + 2 * i) if 4 + 2 * i < end else 0
            out[i] = pos + o if o else 0
        return 0

    cdef object string(self, Py_ssize_t at):
        cdef Py_ssize_t n
        if not at:
            return None
        at += self.u32(at)
        n = self.u32(at)
        self.check(at + 4, n)
        return PyBytes_FromStringAndSize(<const char*>self.p + at + 4, n)

    cdef Py_ssize_t vector(self, Py_ssize_t at, Py_ssize_t width, Py_ssize_t* count) except -1:
        """The start of the elements of the vector whose offset is at ``at``; ``count`` set."""
        at += self.u32(at)
        count[0] = self.u32(at)
        self.check(at + 4, count[0] * width)
        return at + 4

    cdef object strings(self, Py_ssize_t at):
        """The strings of the vector whose offset is at ``at``, as bytes (None when absent)."""
        cdef Py_ssize_t start, n, i
        if not at:
            return None
        start = self.vector(at, 4, &n)
        return [self.string(start + 4 * i) for i in range(n)]

    cdef object table(self, object cls, tuple spec, Py_ssize_t pos, dict vectors,
                      object frombuffer):
        """``net_lean._lean_table`` on a new ``cls()``: the fields of ``spec`` (absent: the
        default), which are all the fields of ``cls``, set as its attributes in their order."""
        cdef Py_ssize_t at[MAX_FIELDS]
        cdef Py_ssize_t k, n, start
        cdef float fv
        cdef int count = len(spec)
        cdef dict d = {}
        if count > MAX_FIELDS:
            raise ValueError("table spec too long")
        # a plain class: its attributes set on a new object, in the order of ``spec`` (its
        # __init__'s), so they share the class's keys (no dict per object); else a dict
        obj = _c_object_new(cls)
        self.slots(pos, count, at)
        for k in range(count):
            name, kind, default = spec[k]
            if not at[k]:
                value = None if kind == "T" or kind == "X" else default
            elif kind == "i":
                value = self.i32(at[k])
            elif kind == "b":
                value = self.i8(at[k])
            elif kind == "?":
                self.check(at[k], 1)
                value = self.p[at[k]] != 0
            elif kind == "f":
                self.check(at[k], 4)
                memcpy(&fv, self.p + at[k], 4)
                value = fv
            elif kind == "S":
                value = self.strings(at[k])
            elif kind == "T":
                start = at[k] + self.u32(at[k])
                value = self.table(default[0], default[1], start, vectors, frombuffer)
            elif kind == "X":  # a field the object API reads: so does it the whole table
                return cls.InitFromBuf(self.data, pos)
            else:
                dtype = vectors[kind]
                start = self.vector(at[k], dtype.itemsize, &n)
                value = frombuffer(self.data, dtype, n, start)
            if obj is NotImplemented:
                d[name] = value
            else:
                PyObject_GenericSetAttr(obj, name, value)
        return _with_dict(cls, d) if obj is NotImplemented else obj

    cdef object text(self, Py_ssize_t at):
        """The string at ``at`` as text ("" when absent); ValueError when not UTF-8."""
        cdef Py_ssize_t n
        if not at:
            return ""
        at += self.u32(at)
        n = self.u32(at)
        self.check(at + 4, n)
        return PyUnicode_DecodeUTF8(<const char*>self.p + at + 4, n, NULL)

    cdef object indexes(self, Py_ssize_t at, Py_ssize_t n_tensors):
        """The int32 vector at ``at`` as a tuple, each value in 0..n_tensors-1 (else ValueError)."""
        cdef Py_ssize_t start, n, i
        cdef int32_t v
        if not at:
            return ()
        start = self.vector(at, 4, &n)
        result = PyTuple_New(n)
        for i in range(n):
            memcpy(&v, self.p + start + 4 * i, 4)
            if v < 0 or v >= n_tensors:
                raise ValueError(f"tensor index {v} outside 0..{n_tensors - 1}")
            item = PyLong_FromLong(v)
            Py_INCREF(item)
            PyTuple_SET_ITEM(result, i, item)
        return result


def read_table(object data, object cls, tuple spec, Py_ssize_t pos, dict vectors,
               object frombuffer):
    """``net_lean._lean_table(cls(), spec, data, pos)`` in C (for the tests)."""
    return _Buf(data).table(cls, spec, pos, vectors, frombuffer)


def read_texts(object data, Py_ssize_t at):
    """The strings of the vector whose offset is at ``at``, decoded as UTF-8 (None: absent).

    Raises:
        ValueError: on an offset outside the bytes, or a string that is not UTF-8.
    """
    cdef _Buf b = _Buf(data)
    cdef Py_ssize_t start, n, i
    if not at:
        return None
    start = b.vector(at, 4, &n)
    return [b.text(start + 4 * i) for i in range(n)]


def read_op_defs(object data, Py_ssize_t at, Py_ssize_t n_tensors, object op_class,
                 dict template, dict formats, dict specs, object param_class, dict vectors,
                 object frombuffer):
    """The ops of the vector whose offset is at ``at``, as ``net.OpDef`` objects.

    What ``net._build_op`` makes of ``net_lean._lean_op``, in one pass. ``op_class`` with
    ``__slots__`` (``OpDef``): each op is ``object.__new__(op_class)`` with every slot set at its
    offset (the header read here, the other fields ``template``'s defaults); a class with a
    ``__dict__``: a copy of ``template`` (every field of ``op_class``, in order) with the header
    set, as its ``__dict__``.

    Args:
        data: the model bytes.
        at: the position of the ``oplists`` field of the Net table.
        n_tensors: the model's tensor count; every input / output index must be below it.
        op_class: ``net.OpDef``.
        template: the ``OpDef`` fields with their defaults.
        formats: ``defaultDimentionFormat`` value -> ``DimensionFormat``.
        specs: ``net_lean._LEAN_PARAMS``: parameter tables read field by field here.
        param_class: ``net_lean._param_class`` (tag -> the generated ``*T`` class).
        vectors: ``net_lean._VECTORS`` (vector kind -> NumPy dtype).
        frombuffer: ``numpy.frombuffer`` (vectors stay views of ``data``).

    Raises:
        ValueError: on any offset, vtable, vector or string outside the bytes, a name that is
            not UTF-8, an index out of range, an unknown format, a missing op: ``net.load_net``
            then reads the bytes with the object API, which names what is broken.
    """
    cdef _Buf b = _Buf(data)
    cdef Py_ssize_t f[8]
    cdef Py_ssize_t start, n, i, pos, table
    cdef int tag, k
    cdef dict d
    cdef dict classes = {}
    # a class with __slots__ (OpDef): each op made by object.__new__, its slots set at their
    # offsets (no dict per op); any other class: a copy of ``template`` as its __dict__
    cdef Py_ssize_t offs[8]
    cdef Py_ssize_t rest_offs[MAX_FIELDS]
    cdef int n_rest = 0
    cdef bint slotted = all(name in template for name in _OP_SET) and (
        len(template) - len(_OP_SET) <= MAX_FIELDS
    )
    rest_defaults = []
    if slotted:
        for k, name in enumerate(_OP_SET):
            offs[k] = slot_offset(op_class, name)
            slotted = slotted and offs[k] >= 0
        for name, value in template.items():
            if name not in _OP_SET:
                rest_offs[n_rest] = slot_offset(op_class, name)
                slotted = slotted and rest_offs[n_rest] >= 0
                rest_defaults.append(value)
                n_rest += 1
        slotted = slotted and _c_object_new(op_class) is not NotImplemented
    start = b.vector(at, 4, &n)
    ops = [None] * n
    for i in range(n):
        pos = start + 4 * i
        pos += b.u32(pos)
        b.slots(pos, 8, f)
        op_type = b.i32(f[5]) if f[5] else 0
        name = b.text(f[3])
        inputs = b.indexes(f[0], n_tensors)
        outputs = b.indexes(f[4], n_tensors)
        if f[1]:
            b.check(f[1], 1)
            tag = b.p[f[1]]
        else:
            tag = 0
        param = None
        if f[2]:
            table = f[2] + b.u32(f[2])
            spec = specs.get(tag)
            cls = classes.get(tag, classes)  # param_class asked once per tag
            if cls is classes:
                cls = classes[tag] = param_class(tag)
            if spec is not None:
                param = b.table(cls, spec, table, vectors, frombuffer)
            elif cls is not None:
                param = cls.InitFromBuf(data, table)
        fmt = formats.get(b.i8(f[6]) if f[6] else 1)
        if fmt is None:
            raise ValueError(f"op #{i}: defaultDimentionFormat is not a format")
        b.string(f[7])  # externalPath: not kept, but checked as the object API reads it
        if slotted:
            op = _c_object_new(op_class)
            _set_slot(op, offs[0], i)
            _set_slot(op, offs[1], op_type)
            _set_slot(op, offs[2], name)
            _set_slot(op, offs[3], inputs)
            _set_slot(op, offs[4], outputs)
            _set_slot(op, offs[5], param)
            _set_slot(op, offs[6], tag)
            _set_slot(op, offs[7], fmt)
            for k in range(n_rest):
                _set_slot(op, rest_offs[k], rest_defaults[k])
            ops[i] = op
            continue
        d = template.copy()
        d["index"] = i
        d["type"] = op_type
        d["name"] = name
        d["inputs"] = inputs
        d["outputs"] = outputs
        d["param"] = param
        d["param_type"] = tag
        d["default_format"] = fmt
        ops[i] = _with_dict(op_class, d)
    return ops


# the OpDef fields read_op_defs sets per op, in the order of its ``offs``
_OP_SET = ("index", "type", "name", "inputs", "outputs", "param", "param_type", "default_format")

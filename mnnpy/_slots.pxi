# Shared by the C twins (``include "_slots.pxi"``): __slots__ members read and written at their
# offsets, as CPython's member descriptors do, without the attribute look-up (about a third of
# the instructions of the shape stage's and the unit loops' C twins went to those look-ups).
# Only for objects of exactly the class whose offset was learnt (a subclass may put a property
# over a slot); an unset slot, or a class without that slot (offset -1), goes through
# getattr / setattr, which raise AttributeError as before. The offsets are learnt once: a slot
# the class itself later covers with another attribute (a test's monkeypatch) is not seen here.

from cpython.object cimport PyObject


cdef extern from *:
    """
    #include <structmember.h>
    static Py_ssize_t mnnpy_slot_offset(PyObject *type, PyObject *name) {
        /* The byte offset in instances of ``type`` of the __slots__ member ``name`` it has (its
           own or a base's): an object member, writable, that raises AttributeError while unset
           (T_OBJECT_EX); else -1. */
        PyObject *d;
        PyMemberDef *m;
        if (!PyType_Check(type) || !PyUnicode_Check(name)) return -1;
        d = _PyType_Lookup((PyTypeObject *)type, name);  /* through the MRO; borrowed, no error */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) return -1;
        m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) return -1;
        return m->offset;
    }
    /* the member at ``off`` (borrowed; NULL while unset) */
    static inline PyObject *mnnpy_slot(PyObject *o, Py_ssize_t off) {
        return *(PyObject **)((char *)o + off);
    }
    static inline void mnnpy_set_slot(PyObject *o, Py_ssize_t off, PyObject *v) {
        PyObject **at = (PyObject **)((char *)o + off);
        PyObject *old = *at;
        Py_INCREF(v);
        *at = v;
        Py_XDECREF(old);
    }
    /* ``object.__new__(cls)`` for a class whose instances ``object`` itself makes (its tp_new
       is object's); NotImplemented for any other class; NULL (an exception set) on failure. */
    static PyObject *mnnpy_object_new(PyObject *cls) {
        static PyObject *no_args = NULL;
        if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new) {
            Py_INCREF(Py_NotImplemented);
            return Py_NotImplemented;
        }
        if (no_args == NULL && (no_args = PyTuple_New(0)) == NULL)
            return NULL;
        return PyBaseObject_Type.tp_new((PyTypeObject *)cls, no_args, NULL);
    }
    """
    object _c_object_new "mnnpy_object_new"(object cls)
    Py_ssize_t slot_offset "mnnpy_slot_offset"(object type, object name)
    PyObject* _slot "mnnpy_slot"(object o, Py_ssize_t off)
    void _set_slot "mnnpy_set_slot"(object o, Py_ssize_t off, object v)


cdef inline object slot_get(object o, object cls, Py_ssize_t off, str name):
    """``getattr(o, name)``; read at ``off`` when ``o`` is exactly a ``cls`` (``off`` >= 0)."""
    cdef PyObject* p
    if off >= 0 and type(o) is cls:
        p = _slot(o, off)
        if p != NULL:
            return <object>p
    return getattr(o, name)


cdef inline void slot_set(object o, object cls, Py_ssize_t off, str name, object value) except *:
    """``setattr(o, name, value)``; written at ``off`` when ``o`` is exactly a ``cls``."""
    if off >= 0 and type(o) is cls:
        _set_slot(o, off, value)
    else:
        setattr(o, name, value)


cdef inline object new_plain(object cls):
    """``cls.__new__(cls)``: in C when ``cls``'s instances are made by ``object`` itself."""
    o = _c_object_new(cls)
    return cls.__new__(cls) if o is NotImplemented else o

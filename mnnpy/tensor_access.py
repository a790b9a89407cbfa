"""Tensor's hot accessors in C (``mnnpy._unitfast``), where built.

``Tensor.storage_format``, ``is_packed``, ``storage_elements``, ``size`` and ``buffer`` are asked
thousands of times per session creation; a property whose getter is C costs no Python frame.
The Python getters stay as their reference (``PYTHON_ACCESSORS``, and ``tensor._stored_format``
as ``tensor._stored_format_python``); ``tests/unit/test_tensor.py`` compares both. This module
imports nothing of mnnpy: ``mnnpy.tensor`` calls :func:`use_c_accessors` with itself.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

_NAMES = ("storage_format", "is_packed", "storage_elements", "size", "buffer")
PYTHON_ACCESSORS: dict[str, Any] = {}  # name -> Tensor's Python property (filled by the call)


def use_c_accessors(tensor: ModuleType) -> bool:
    """Make ``tensor.Tensor``'s accessors and ``tensor._stored_format`` the C twins.

    ``tensor`` is the ``mnnpy.tensor`` module. False (the Python ones kept) when not built.
    """
    cls = tensor.Tensor
    PYTHON_ACCESSORS.update({name: cls.__dict__[name] for name in _NAMES})
    setattr(tensor, "_stored_format_python", tensor._stored_format)  # noqa: B010
    try:
        from mnnpy import _unitfast as fast
    except ImportError:  # not built: the Python ones
        return False
    buffer = PYTHON_ACCESSORS["buffer"].fget
    fast.tensor_accessors(tensor._KEEPS_FORMAT, tensor._format_of, tensor.NC4HW4_FORMAT, buffer)
    getters = (fast.stored_format, fast.is_packed, fast.storage_elements, fast.storage_size)
    for name, getter in zip(_NAMES, (*getters, fast.buffer), strict=True):
        setattr(cls, name, property(getter, doc=PYTHON_ACCESSORS[name].__doc__))
    setattr(tensor, "_stored_format", fast.stored_format)  # noqa: B010
    return True

"""MNN's Module API on mnnpy: ``load_module_from_file``, ``Module``, ``Var``.

::

    import numpy as np
    from mnnpy import nn

    net = nn.load_module_from_file("model.mnn", [], [], thread_num=1)
    y = net.forward(nn.Var(np.zeros((1, 3, 32, 32), np.float32)))  # or the array itself
    print(y.shape, y.read())

A loaded module runs one mnnpy Session, resized when an input's shape changes (see
:mod:`mnnpy.nn.module`); models with control flow (``If`` / ``While``) run as any other.
"""

from __future__ import annotations

from mnnpy.nn.loader import load_module_from_buffer, load_module_from_file
from mnnpy.nn.module import Module, NetModule
from mnnpy.nn.var import DataFormat, Var, as_var

__all__ = [
    "DataFormat",
    "Module",
    "NetModule",
    "Var",
    "as_var",
    "load_module_from_buffer",
    "load_module_from_file",
]

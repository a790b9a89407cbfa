"""Op case families, one function per op type, grouped in modules by kind of op.

Every case uses fixed seeds, batch 2 where the op has a batch, odd spatial sizes and the channel
counts of :data:`~mnnpy.testing.families.common.CHANNELS`. To cover a new op type, add a function
decorated with ``@family("<OpType name>")`` to the module of its kind, or to a new module in this
package: every module here is imported (in sorted order, as the CPU executions are), so nothing
needs listing.
"""

from __future__ import annotations

import importlib
import pkgutil

from mnnpy.testing.families.common import CHANNELS, FAMILIES, data, family

__all__ = ["CHANNELS", "FAMILIES", "data", "family"]

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    importlib.import_module(f"{__name__}.{_info.name}")

"""Op case families, one function per op type, grouped in modules by kind of op.

Every case uses fixed seeds, batch 2 where the op has a batch, odd spatial sizes and the channel
counts of :data:`~mnnpy.testing.families.common.CHANNELS`. To cover a new op type, add a function
decorated with ``@family("<OpType name>")`` to the module of its kind.
"""

from __future__ import annotations

from mnnpy.testing.families import compute, elementwise, movement  # noqa: F401 - registers
from mnnpy.testing.families.common import CHANNELS, FAMILIES, data, family

__all__ = ["CHANNELS", "FAMILIES", "data", "family"]

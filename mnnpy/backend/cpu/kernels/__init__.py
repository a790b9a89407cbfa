"""Cython kernels of the CPU backend (built by ``setup.py``), and :func:`specialize`."""

from __future__ import annotations

from typing import Any

import numpy as np

# NumPy dtypes -> the names Cython gives the members of our fused types
_FUSED_NAMES = {
    np.dtype(np.float32): "float",
    np.dtype(np.int32): "int",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint8): "u8",
}


def specialize(kernel: Any, *dtypes: np.dtype) -> Any:
    """The specialization of a fused-type kernel for ``dtypes`` (in its fused types' order).

    ``kernel`` itself when there is none.

    Calling a fused function picks the specialization from its buffer arguments on every call
    (about a microsecond); executions resolve it once in ``on_resize`` instead.
    """
    signatures = getattr(kernel, "__signatures__", None)
    names = [_FUSED_NAMES.get(np.dtype(d)) for d in dtypes]
    if not signatures or None in names:
        return kernel
    return signatures.get("|".join(names), kernel)  # type: ignore[arg-type]


def _load_with_wait_policy() -> None:
    """Load libgomp (through the first kernel module) under the wait policy, then tidy up.

    libgomp reads its environment once, when it loads; see :mod:`mnnpy.backend.cpu.wait_policy`.
    """
    from mnnpy.backend.cpu import wait_policy

    wait_policy.POLICY = wait_policy.apply_default()
    try:
        from mnnpy.backend.cpu.kernels import pack  # noqa: F401  (links libgomp)
    except ImportError:  # kernels not built yet: the variable stays for the first that loads
        return
    wait_policy.restore(wait_policy.POLICY)


_load_with_wait_policy()

"""The kit's one-op cases: every family of :mod:`mnnpy.testing.families`, selectable by op type."""

from __future__ import annotations

from collections.abc import Iterable

from mnnpy.testing.cases import OpCase
from mnnpy.testing.families import FAMILIES

__all__ = ["covered_op_types", "op_cases", "uncovered_op_types"]


def covered_op_types() -> list[str]:
    """Names of the op types the kit has cases for."""
    return sorted({c.op_type_name for make in FAMILIES.values() for c in make()})


def uncovered_op_types() -> list[str]:
    """Op types with a reference in ``mnnpy/ops`` but no conformance cases (yet)."""
    from mnnpy.net import op_type_name
    from mnnpy.ops import _REFERENCES, load_all

    load_all()
    covered = set(covered_op_types())
    return sorted({op_type_name(t) for t in _REFERENCES} - covered)


def op_cases(ops: Iterable[str] | None = None) -> list[OpCase]:
    """The kit's op cases, optionally only those of the op types named in ``ops``.

    Args:
        ops: op type names (``"ReLU"``, ``"convolution"``: case does not matter); None for all.

    Returns:
        Cases named ``<op type>/<variant>``, grouped by family.

    Raises:
        ValueError: for a name the kit has no cases for, listing those it has.
    """
    cases = []
    for make in FAMILIES.values():
        for case in make():
            case.name = f"{case.op_type_name}/{case.name}"
            cases.append(case)
    if ops is not None:
        wanted = {str(o).lower() for o in ops}
        covered = {c.op_type_name.lower() for c in cases}
        unknown = sorted(o for o in wanted if o not in covered)
        if unknown:
            names = sorted({c.op_type_name for c in cases})
            raise ValueError(f"no conformance cases for {unknown}; the kit covers {names}")
        cases = [c for c in cases if c.op_type_name.lower() in wanted]
    names = [c.name for c in cases]
    if len(set(names)) != len(names):  # a family reused a variant name
        raise ValueError(f"duplicate conformance case names: {sorted(set(names))}")
    return cases

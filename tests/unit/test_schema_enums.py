"""Hand-written copies of schema enums agree with the generated ``mnnpy._schema`` readers.

``DataType`` (``mnnpy/tensor_format.py``) and the op codes the Cython kernels switch on
(``unary.pyx``: UnaryOpOperation, ``eltwise.pyx``: BinaryOpOperation, ``reduce.pyx``:
ReductionType) are copies of enums in ``schema/*.fbs``; ``_schema`` is generated from it by
``tools/gen_schema.sh``. A kernel's ``cdef enum`` is not visible from Python, so its source is
read: the ``cdef enum:`` block under the comment that names the schema enum.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from mnnpy.tensor_format import DataType

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "mnnpy" / "backend" / "cpu" / "kernels"

# kernel source, schema enum, whether the kernel lists every member of the schema enum
KERNEL_ENUMS = [
    ("unary.pyx", "UnaryOpOperation", True),
    ("eltwise.pyx", "BinaryOpOperation", False),
    ("reduce.pyx", "ReductionType", True),
]

_MEMBER = re.compile(r"^    ([A-Za-z_][A-Za-z0-9_]*) = (-?\d+)\s*(?:#.*)?$")


def _schema_enum(name: str) -> dict[str, int]:
    cls = getattr(importlib.import_module(f"mnnpy._schema.MNN.{name}"), name)
    return {k: v for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


def _pyx_enum(text: str, schema_name: str) -> dict[str, int]:
    """The ``cdef enum:`` block right after a comment line naming ``schema_name``."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("#") and schema_name in line and lines[i + 1] == "cdef enum:":
            members = {}
            for body in lines[i + 2 :]:
                m = _MEMBER.match(body)
                if m is None:
                    break
                members[m.group(1)] = int(m.group(2))
            return members
    raise AssertionError(f"no '# ... {schema_name} ...' comment over a 'cdef enum:' block")


def _key(name: str) -> str:
    """Names compared case- and underscore-blind (``SQUARED_DIFFERENCE``, ``SquaredDifference``)."""
    return name.replace("_", "").upper()


def _mismatches(copy: dict[str, int], schema: dict[str, int], complete: bool) -> list[str]:
    by_key = {_key(k): (k, v) for k, v in schema.items()}
    bad = []
    for name, value in copy.items():
        if _key(name) not in by_key:
            bad.append(f"{name} = {value}: not in the schema")
        elif by_key[_key(name)][1] != value:
            bad.append(f"{name} = {value}: the schema has {by_key[_key(name)][1]}")
    if complete:
        have = {_key(k) for k in copy}
        bad += [f"{k} = {v}: missing" for k, v in schema.items() if _key(k) not in have]
    return bad


@pytest.mark.parametrize(("source", "schema_name", "complete"), KERNEL_ENUMS)
def test_kernel_enum_matches_schema(source: str, schema_name: str, complete: bool) -> None:
    copy = _pyx_enum((KERNELS / source).read_text(encoding="utf-8"), schema_name)
    assert len(copy) >= 9, copy  # the block was found and read
    assert not _mismatches(copy, _schema_enum(schema_name), complete)


def test_data_type_matches_schema() -> None:
    copy = {m.name: int(m.value) for m in DataType}
    schema = _schema_enum("DataType")
    assert copy == schema  # names spelled as in the schema, every member, same values


def test_check_can_fail() -> None:
    text = "# MNN's ReductionType values.\ncdef enum:\n    SUM = 0\n    ASUM = 2\n    ODD = 9\n"
    copy = _pyx_enum(text, "ReductionType")
    assert copy == {"SUM": 0, "ASUM": 2, "ODD": 9}
    bad = _mismatches(copy, _schema_enum("ReductionType"), complete=True)
    assert "ASUM = 2: the schema has 1" in bad
    assert "ODD = 9: not in the schema" in bad
    assert "ALL = 8: missing" in bad

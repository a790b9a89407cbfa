"""Testing tools for mnnpy and for backend authors: model builders and the conformance kit.

Build one-op models in code (``make_single_op_net``, ``run_op``) and prove a backend right with
the conformance kit (Glow's backend-parameterized tests)::

    import mnnpy
    from mnnpy.testing import run_conformance

    mnnpy.insert_extra_backend_creator(mnnpy.ForwardType.USER_0, MyCreator())
    report = run_conformance(mnnpy.ForwardType.USER_0)
    print(report.table())  # per op type: cases, passed, failed, ran on backend, fell back
    assert report.ok

or from the command line, through the pytest plugin::

    pytest --pyargs mnnpy.testing --mnnpy-backend=USER_0 --mnnpy-backend-plugin=path/to/plugins

Importing this package does not need pytest.
"""

from __future__ import annotations

from mnnpy.testing.builders import (
    ATOL,
    RTOL,
    assert_close,
    const_op,
    input_op,
    make_op,
    make_single_op_net,
    run_net,
    run_op,
)
from mnnpy.testing.cases import ModelCase, OpCase, compare
from mnnpy.testing.lowering import LoweringCheck, check_lowering, lowering_cases
from mnnpy.testing.model_cases import bench_model_dir, default_model_dirs, model_cases
from mnnpy.testing.op_cases import covered_op_types, op_cases, uncovered_op_types
from mnnpy.testing.report import CaseResult, ConformanceReport, OpTypeRow
from mnnpy.testing.runner import parse_forward_type, run_case, run_conformance
from mnnpy.testing.substitution import (
    SubstitutionReport,
    check_substitutions,
)

__all__ = [
    "ATOL",
    "RTOL",
    "CaseResult",
    "LoweringCheck",
    "SubstitutionReport",
    "ConformanceReport",
    "ModelCase",
    "OpCase",
    "OpTypeRow",
    "assert_close",
    "bench_model_dir",
    "check_lowering",
    "check_substitutions",
    "compare",
    "const_op",
    "covered_op_types",
    "default_model_dirs",
    "input_op",
    "lowering_cases",
    "make_op",
    "make_single_op_net",
    "model_cases",
    "op_cases",
    "parse_forward_type",
    "run_case",
    "run_conformance",
    "run_net",
    "run_op",
    "uncovered_op_types",
]

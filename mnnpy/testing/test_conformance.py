"""The conformance kit as tests: ``pytest --pyargs mnnpy.testing --mnnpy-backend=USER_0``.

One test per case; the fixtures come from :mod:`mnnpy.testing.pytest_plugin`, which also prints
the per-op table at the end of the run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mnnpy.config import ScheduleConfig
from mnnpy.testing import ModelCase, OpCase, model_cases, op_cases, run_case
from mnnpy.testing.lowering import check_lowering, lowering_cases
from mnnpy.testing.report import CaseResult
from mnnpy.testing.substitution import check_substitutions


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "op_case" in metafunc.fixturenames:
        ops = op_cases()
        metafunc.parametrize("op_case", ops, ids=[c.name for c in ops])
    if "model_case" in metafunc.fixturenames:
        config = metafunc.config
        models = model_cases(include_bench=config.getoption("mnnpy_bench_models", False))
        extra = config.getoption("mnnpy_model_dir", None)
        models += model_cases(extra) if extra else []
        metafunc.parametrize("model_case", models, ids=[c.name for c in models])


def check(
    case: OpCase | ModelCase,
    config: ScheduleConfig,
    record: Callable[[CaseResult], None],
) -> None:
    result = run_case(case, config)
    record(result)
    if not result.passed:
        where = f" (ran on {result.backend})" if result.backend else ""
        pytest.fail(f"{result.name}{where}: {result.error}", pytrace=False)


def test_op(
    op_case: OpCase, schedule_config: ScheduleConfig, mnnpy_record: Callable[[CaseResult], None]
) -> None:
    check(op_case, schedule_config, mnnpy_record)


def test_model(
    model_case: ModelCase,
    schedule_config: ScheduleConfig,
    mnnpy_record: Callable[[CaseResult], None],
) -> None:
    check(model_case, schedule_config, mnnpy_record)


def test_substitutions(model_case: ModelCase, schedule_config: ScheduleConfig) -> None:
    """Every group the backend fuses equals the ops it replaces (rtol 1e-3, atol 1e-4)."""
    report = check_substitutions(model_case, schedule_config)
    bad = [g for g in report.groups if not g.ok]
    if bad or not report.outputs_ok:
        pytest.fail(f"{report.model}: fused != unfused: {bad or 'model outputs'}", pytrace=False)


@pytest.mark.parametrize("lowering_case", lowering_cases(), ids=lambda c: c.name)
def test_lowering(lowering_case: OpCase, schedule_config: ScheduleConfig) -> None:
    """Each composite lowered on the backend under test equals its reference (rtol 1e-3)."""
    result = check_lowering(lowering_case, schedule_config)
    if not result.ok:
        pytest.fail(f"{result.name} (on {', '.join(result.backends)}): {result.message}",
                    pytrace=False)  # fmt: skip

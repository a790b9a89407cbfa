"""Run conformance cases on a backend and record what happened (Glow's backend test suites).

Each case gets its own session with ``ScheduleConfig(type=<backend under test>,
backup_type=...)``. A case passes when its outputs match the reference; where each op ran comes
from ``session.placement()``, so the report tells "wrong" apart from "never ran there".
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable

import numpy as np

from mnnpy.backend import ForwardType
from mnnpy.config import ScheduleConfig
from mnnpy.errors import NotSupportError
from mnnpy.session import Session
from mnnpy.testing.builders import run_net
from mnnpy.testing.cases import ModelCase, OpCase, compare
from mnnpy.testing.model_cases import model_cases
from mnnpy.testing.op_cases import op_cases
from mnnpy.testing.report import CaseResult, ConformanceReport

__all__ = ["parse_forward_type", "run_case", "run_conformance"]


def parse_forward_type(value: ForwardType | int | str) -> ForwardType:
    """A ForwardType from itself, its number, or its name (``"USER_0"``, ``"cpu"``, ``"8"``).

    Raises:
        ValueError: for anything else, listing the names.
    """
    try:
        if isinstance(value, str):
            key = value.strip().upper()
            return ForwardType(int(key)) if key.isdigit() else ForwardType[key]
        return ForwardType(value)
    except (KeyError, ValueError):
        names = list(ForwardType.__members__)
        raise ValueError(f"unknown forward type {value!r}; use one of {names}") from None


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _execute(
    case: OpCase | ModelCase, config: ScheduleConfig
) -> tuple[Session, dict[str, np.ndarray]]:
    if isinstance(case, OpCase):
        return run_net(case.model(), case.feeds(), config, quiet_fallback=True)
    with open(case.path, "rb") as f:
        data = f.read()
    return run_net(data, case.inputs, config, quiet_fallback=True)


def _record_placement(result: CaseResult, session: Session, under_test: str) -> None:
    places = session.placement()
    if result.kind == "op":
        mine = [p for p in places if p.op_name == "op"]
        if mine:  # a folded op ran nowhere
            result.backend = mine[0].backend
            result.fell_back = mine[0].backend != under_test
    else:
        result.ops_on_backend = sum(p.backend == under_test for p in places)
        result.ops_fell_back = sum(p.backend != under_test for p in places)


def run_case(case: OpCase | ModelCase, config: ScheduleConfig) -> CaseResult:
    """Run one case on a session made with ``config``; never raises for a backend's failure.

    With ``config.strict``, a case whose op would fall back fails; its result still says where
    the op would have run (found with a non-strict session).
    """
    kind = "op" if isinstance(case, OpCase) else "model"
    op_type = case.op_type_name if isinstance(case, OpCase) else "model"
    result = CaseResult(case.name, kind, op_type, passed=False)
    expected = case.expected() if isinstance(case, OpCase) else case.outputs
    under_test = (config.backends[0] if config.backends else config.type).name
    start = time.perf_counter()
    try:
        session, outputs = _execute(case, config)
    except Exception as e:  # noqa: BLE001 - any failure of the backend is a result to report
        result.error = _error(e)
        if config.strict and isinstance(e, NotSupportError):
            relaxed = dataclasses.replace(config, strict=False)
            try:
                _record_placement(result, _execute(case, relaxed)[0], under_test)
            except Exception:  # noqa: BLE001 - the strict error above is what counts
                pass
    else:
        _record_placement(result, session, under_test)
        result.passed, result.max_abs_diff, result.error = compare(
            outputs, expected, case.rtol, case.atol
        )
    result.seconds = time.perf_counter() - start
    return result


def run_conformance(
    forward_type: ForwardType | int | str,
    *,
    backup_type: ForwardType | int | str = ForwardType.CPU,
    strict: bool = False,
    ops: Iterable[str] | None = None,
    include_models: bool = True,
    model_dirs: Iterable[str | os.PathLike[str]] | None = None,
    include_bench: bool = False,
    num_thread: int = 1,
    progress: Callable[[CaseResult], None] | None = None,
) -> ConformanceReport:
    """Run the kit on one backend.

    Args:
        forward_type: the backend under test (registered, e.g. with
            ``mnnpy.insert_extra_backend_creator`` or as a plugin).
        backup_type: where ops the backend cannot run go.
        strict: make sessions refuse fallbacks, so ops the backend lacks fail.
        ops: op type names to test (see :func:`~mnnpy.testing.op_cases`); None for all.
        include_models: also run the model cases.
        model_dirs: where model cases come from (see :func:`~mnnpy.testing.model_cases`).
        include_bench: also the cached benchmark models.
        num_thread: threads per op.
        progress: called with each result as it is made.

    Returns:
        The report; ``report.ok`` is True when every case passed.

    Raises:
        NotSupportError: when ``forward_type`` or ``backup_type`` has no registered backend.
        ValueError: for an unknown op name in ``ops``.
    """
    from mnnpy.backend import get_backend

    under_test, backup = parse_forward_type(forward_type), parse_forward_type(backup_type)
    get_backend(under_test)  # fail once, here, instead of once per case
    get_backend(backup)
    config = ScheduleConfig(
        type=under_test, backup_type=backup, strict=strict, num_thread=num_thread
    )
    cases: list[OpCase | ModelCase] = list(op_cases(ops))
    if include_models:
        cases += model_cases(model_dirs, include_bench)
    report = ConformanceReport(under_test.name, backup.name, strict)
    for case in cases:
        result = run_case(case, config)
        report.results.append(result)
        if progress is not None:
            progress(result)
    return report

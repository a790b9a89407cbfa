"""Results of a conformance run: one CaseResult per case, a per-op-type table, totals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CaseResult", "ConformanceReport", "OpTypeRow"]

OP_HEADER = ("op type", "cases", "passed", "failed", "on backend", "fell back")
MODEL_HEADER = ("model", "result", "ops on backend", "ops fell back", "max abs diff")


@dataclass
class CaseResult:
    """The outcome of one case.

    Attributes:
        name: the case's name (``<op type>/<variant>``, or the model's name).
        kind: ``"op"`` or ``"model"``.
        op_type: the op type's name for op cases; ``"model"`` for model cases.
        passed: the outputs matched within tolerance.
        error: why it failed: the exception (type and message) or the differences found.
        max_abs_diff: the largest absolute difference from the expected outputs, when compared.
        backend: for op cases, the backend the op ran on; None when no session was made.
        fell_back: for op cases, whether the op landed on another backend than the one under
            test (with ``strict``, where it would have landed); None when unknown.
        ops_on_backend: for model cases, how many ops ran on the backend under test.
        ops_fell_back: for model cases, how many ops fell back.
        seconds: wall time of the case.
    """

    name: str
    kind: str
    op_type: str
    passed: bool
    error: str = ""
    max_abs_diff: float | None = None
    backend: str | None = None
    fell_back: bool | None = None
    ops_on_backend: int = 0
    ops_fell_back: int = 0
    seconds: float = 0.0

    @property
    def ran_on_backend(self) -> bool:
        """For op cases: the op ran on the backend under test."""
        return self.fell_back is False


@dataclass
class OpTypeRow:
    """One line of the table: the op cases of one op type."""

    op_type: str
    cases: int = 0
    passed: int = 0
    failed: int = 0
    on_backend: int = 0
    fell_back: int = 0

    def add(self, r: CaseResult) -> None:
        """Count one case."""
        self.cases += 1
        self.passed += r.passed
        self.failed += not r.passed
        self.on_backend += r.ran_on_backend
        self.fell_back += bool(r.fell_back)


@dataclass
class ConformanceReport:
    """What a conformance run found, for one backend.

    Attributes:
        forward_type: the name of the backend under test (``CPU``, ``USER_0``...).
        backup_type: the name of the backup backend.
        strict: whether sessions refused fallbacks.
        results: one entry per case, op cases first.
    """

    forward_type: str
    backup_type: str = "CPU"
    strict: bool = False
    results: list[CaseResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every case passed (falling back is allowed unless ``strict``)."""
        return all(r.passed for r in self.results)

    @property
    def op_results(self) -> list[CaseResult]:
        """The op cases' results."""
        return [r for r in self.results if r.kind == "op"]

    @property
    def model_results(self) -> list[CaseResult]:
        """The model cases' results."""
        return [r for r in self.results if r.kind == "model"]

    @property
    def failures(self) -> list[CaseResult]:
        """The cases that failed."""
        return [r for r in self.results if not r.passed]

    def by_op_type(self) -> list[OpTypeRow]:
        """One row per op type, sorted by name."""
        rows: dict[str, OpTypeRow] = {}
        for r in self.op_results:
            rows.setdefault(r.op_type, OpTypeRow(r.op_type)).add(r)
        return [rows[k] for k in sorted(rows)]

    def totals(self) -> OpTypeRow:
        """The op cases summed over op types."""
        total = OpTypeRow("total")
        for r in self.op_results:
            total.add(r)
        return total

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): settings, rows, totals and every case."""
        return {
            "forward_type": self.forward_type,
            "backup_type": self.backup_type,
            "strict": self.strict,
            "ok": self.ok,
            "op_types": [vars(row) for row in self.by_op_type()],
            "totals": vars(self.totals()),
            "results": [vars(r) for r in self.results],
        }

    def table(self, max_failures: int = 20) -> str:
        """The per-op-type table, the model cases and the first ``max_failures`` failures."""
        lines = [
            f"mnnpy conformance of {self.forward_type} (backup {self.backup_type}, "
            f"strict {'on' if self.strict else 'off'}): "
            f"{'OK' if self.ok else 'FAILED'}, {len(self.failures)} of {len(self.results)} "
            "cases failed"
        ]
        rows = [astuple(row) for row in self.by_op_type()]
        if rows:
            lines += _grid(OP_HEADER, rows, astuple(self.totals()))
        models = self.model_results
        if models:
            lines.append("")
            lines += _grid(MODEL_HEADER, [_model_row(r) for r in models])
        failures = self.failures
        if failures and max_failures > 0:
            lines.append("")
            lines.append("failures:")
            for r in failures[:max_failures]:
                lines.append(f"  {r.name}: {r.error}")
            if len(failures) > max_failures:
                lines.append(f"  ... and {len(failures) - max_failures} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def astuple(row: OpTypeRow) -> tuple[Any, ...]:
    """A row's cells in table order."""
    return (row.op_type, row.cases, row.passed, row.failed, row.on_backend, row.fell_back)


def _model_row(r: CaseResult) -> tuple[Any, ...]:
    diff = "-" if r.max_abs_diff is None else f"{r.max_abs_diff:.3g}"
    return (r.name, "passed" if r.passed else "FAILED", r.ops_on_backend, r.ops_fell_back, diff)


def _grid(
    header: Sequence[str], rows: Sequence[Sequence[Any]], total: Sequence[Any] | None = None
) -> list[str]:
    """Text columns: the first left-aligned, the others right-aligned; a rule before totals."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    if total is not None:
        cells.append(list(map(str, total)))
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])

    out = [line(cells[0])] + [line(r) for r in cells[1 : len(rows) + 1]]
    if total is not None:
        out += ["-" * len(out[0]), line(cells[-1])]
    return out

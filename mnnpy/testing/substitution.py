"""The kit's substitution check: every fused group equals the ops it replaces.

A backend's substitutions (``Backend.optimize_subgraph``) must compute what the unfused ops
compute. :func:`check_substitutions` runs a model twice on the backend under test, once as
placed and fused, once with substitutions off (``mnnpy.substitute.disabled``), on the same
inputs, and compares each group's outputs and the model's outputs within rtol 1e-3 / atol 1e-4.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mnnpy.config import ScheduleConfig
from mnnpy.interpreter import Interpreter
from mnnpy.session import Session
from mnnpy.substitute import FusedUnit, disabled
from mnnpy.tensor import Tensor
from mnnpy.testing.builders import ATOL, RTOL
from mnnpy.testing.cases import ModelCase

__all__ = ["GroupCheck", "SubstitutionReport", "check_substitutions"]


@dataclass(frozen=True)
class GroupCheck:
    """One fused group: its name, member op types, and its largest difference from unfused."""

    name: str
    kinds: str
    max_abs: float
    ok: bool


@dataclass
class SubstitutionReport:
    """What :func:`check_substitutions` found for one model."""

    model: str
    groups: list[GroupCheck] = field(default_factory=list)
    outputs_ok: bool = True

    @property
    def ok(self) -> bool:
        """Every group and every model output within tolerance."""
        return self.outputs_ok and all(g.ok for g in self.groups)


def _run(
    interp: Interpreter, session: Session, case: ModelCase, wanted: set[int]
) -> dict[int, np.ndarray]:
    """Run once; the values of the ``wanted`` tensors (by index) right after they are written.

    Read in a callback: once the run is over, the memory of intermediates may hold later tensors.
    """
    for name, value in case.inputs.items():
        interp.get_session_input(session, name).copy_from(value)
    seen: dict[int, np.ndarray] = {}

    def after(outputs: Sequence[Tensor], info: object) -> bool:
        for t in outputs:
            if t.describe.index in wanted:
                seen[t.describe.index] = t.numpy()
        return True

    session.run_with_callback(None, after)
    return seen


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))


def check_substitutions(case: ModelCase, config: ScheduleConfig) -> SubstitutionReport:
    """Compare ``case`` run with the backend's substitutions and without them."""
    interp = Interpreter(str(case.path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fallbacks are the op checks' business
        fused = interp.create_session(config)
        with disabled():
            plain = interp.create_session(config)
    report = SubstitutionReport(case.name)
    units = [u for p in fused.pipelines for u in p.units if isinstance(u, FusedUnit)]
    wanted = {t.describe.index for u in units for t in u.outputs}
    got, want = _run(interp, fused, case, wanted), _run(interp, plain, case, wanted)
    for unit in units:
        diffs = []
        ok = True
        for t in unit.outputs:
            i = t.describe.index
            if i not in got or i not in want:
                ok = False
                diffs.append(float("inf"))
                continue
            a, b = got[i], want[i]
            ok = ok and _close(a, b)
            diffs.append(float(np.max(np.abs(a - b))) if a.shape == b.shape else float("inf"))
        report.groups.append(GroupCheck(unit.op.name, unit.op.type_name, max(diffs), ok))
    outs, ref = fused.get_output_all(), plain.get_output_all()
    report.outputs_ok = all(_close(outs[k].numpy(), ref[k].numpy()) for k in ref)
    return report

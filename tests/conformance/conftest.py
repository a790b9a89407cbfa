"""One summary line for the ONNX node-suite subset (tests/conformance/test_node_subset.py)."""

from __future__ import annotations

from typing import Any

_PREFIX = "test_node_subset.py::test_node_case["


def pytest_terminal_summary(terminalreporter: Any) -> None:
    stats = terminalreporter.stats

    def cases(key: str) -> list[str]:
        reports = [r for r in stats.get(key, []) if _PREFIX in getattr(r, "nodeid", "")]
        calls = [r for r in reports if getattr(r, "when", "call") == "call"]
        return sorted(r.nodeid.split(_PREFIX, 1)[1][:-1] for r in calls)

    passed, failed = cases("passed"), cases("failed")
    xfailed, xpassed = cases("xfailed"), cases("xpassed")
    total = len(passed) + len(failed) + len(xfailed) + len(xpassed)
    if not total:
        return
    line = (
        f"ONNX node subset: {len(passed) + len(xpassed)}/{total} pass "
        f"({len(passed)} pinned, {len(xpassed)} newly passing), {len(failed)} pinned regressions, "
        f"{len(xfailed)} not yet supported"
    )
    terminalreporter.write_sep("-", line)
    if xpassed:
        terminalreporter.write_line(
            "newly passing (pin with `python tools/conformance.py --repin`): " + " ".join(xpassed)
        )

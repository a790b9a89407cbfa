"""Fixtures shared by the kernel tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mnnpy.backend.cpu.kernels import gemm as G


@pytest.fixture(params=G.available_isas())
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every kernel ISA this CPU runs (``generic`` everywhere), restored to the best after."""
    G.set_isa(request.param)
    yield request.param
    G.set_isa("best")

"""Models bundled with the package (``default.mnn``: a small CNN from MNN's converter)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_MODEL", "DEFAULT_INPUTS"]

DEFAULT_MODEL = Path(__file__).with_name("default.mnn")
# Input and MNN's own output for DEFAULT_MODEL (keys ``input:<name>`` / ``output:<name>``).
DEFAULT_INPUTS = Path(__file__).with_name("default.npz")

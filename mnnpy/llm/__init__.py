"""``mnnpy.llm``: run ``llmexport`` folders like MNN's ``MNN.llm`` (see :mod:`mnnpy.llm.engine`)."""

from __future__ import annotations

from mnnpy.llm.engine import Llm, create

__all__ = ["Llm", "create"]

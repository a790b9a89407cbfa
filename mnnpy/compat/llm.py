"""``MNN.llm`` of the compat facade (``import mnnpy.compat as MNN; MNN.llm.create(...)``).

The same API as the ``mnn`` wheel's ``MNN.llm`` (``create``, ``Llm.load``, ``forward``,
``generate``, ``response``, ``tokenizer_encode`` / ``tokenizer_decode``,
``apply_chat_template``, ``set_config``, ``reset``), run by :mod:`mnnpy.llm`. Differences:
``forward`` returns a NumPy array ``[1, 1, vocab]`` (the wheel: an ``MNN.expr`` Var);
``generate(ids)`` returns the new tokens (the wheel's Python ``generate`` returns ``[]``).
"""

from __future__ import annotations

from mnnpy.llm import Llm, create

__all__ = ["Llm", "create"]

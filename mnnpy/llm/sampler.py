"""Next-token samplers of ``config.json`` (MNN's ``Sampler``).

Greedy, temperature, top-k, top-p, min-p, tail-free, locally typical, and ``mixed`` (a list of
those steps, then a draw).

Each step narrows a candidate set ``(ids, logits)``; the probability-based steps use
``softmax(logits / temperature)``. The draw is from ``softmax(logits / temperature)`` over what
is left, with NumPy's generator (seeded from ``seed`` in the config when given), so sampled
replies do not reproduce MNN's random numbers; greedy is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mnnpy.errors import InvalidValueError, NotSupportError

__all__ = ["Sampler"]

_MIXED = ["topK", "tfs", "typical", "topP", "min_p", "temperature"]
_ALIASES = {"minP": "min_p", "topk": "topK", "topp": "topP"}


def _probs(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits.astype(np.float64) / max(temperature, 1e-6)
    e = np.exp(z - z.max())
    return e / e.sum()


class Sampler:
    """Picks the next token from a row of logits.

    Args:
        config: ``sampler_type`` (greedy, temperature, topK, topP, minP, tfs, typical, mixed),
            ``mixed_samplers``, ``temperature``, ``top_k``, ``top_p``, ``min_p``, ``tfs_z``,
            ``typical``, ``seed``.

    Raises:
        NotSupportError: for a sampler type or mixed step mnnpy does not have (penalty, ngram).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.kind = str(config.get("sampler_type", "greedy"))
        self.temperature = float(config.get("temperature", 1.0))
        self.top_k = int(config.get("top_k", 40))
        self.top_p = float(config.get("top_p", 0.9))
        self.min_p = float(config.get("min_p", 0.1))
        self.tfs_z = float(config.get("tfs_z", 1.0))
        self.typical = float(config.get("typical", 1.0))
        seed = config.get("seed")
        self.rng = np.random.default_rng(None if seed is None else int(seed))
        if self.kind == "mixed":
            names = [str(n) for n in config.get("mixed_samplers", _MIXED)]
        elif self.kind in ("greedy", "temperature"):
            names = [self.kind]
        else:
            names = [self.kind]
        self.steps = [_ALIASES.get(n, n) for n in names]
        unknown = [n for n in self.steps if n not in _STEPS and n not in ("greedy", "temperature")]
        if unknown:
            raise NotSupportError(f"sampler step(s) {unknown} (mnnpy has {sorted(_STEPS)})")
        if self.temperature <= 0 and "temperature" in self.steps:
            raise InvalidValueError(f"temperature must be positive, got {self.temperature}")

    def sample(self, logits: np.ndarray) -> int:
        """The next token id from ``logits`` (``[vocab]``)."""
        row = np.asarray(logits, np.float32).reshape(-1)
        if self.steps == ["greedy"] or self.steps[-1] == "greedy":
            ids = np.arange(row.size)
            for name in self.steps[:-1]:
                ids, row = _STEPS[name](self, ids, row)
            return int(ids[int(np.argmax(row))])
        ids = np.arange(row.size)
        for name in self.steps:
            if name in _STEPS:
                ids, row = _STEPS[name](self, ids, row)
        if ids.size == 1:
            return int(ids[0])
        return int(ids[self.rng.choice(ids.size, p=_probs(row, self.temperature))])


def _top_k(s: Sampler, ids: np.ndarray, row: np.ndarray):
    if s.top_k <= 0 or s.top_k >= row.size:
        return ids, row
    keep = np.argsort(-row, kind="stable")[: s.top_k]
    return ids[keep], row[keep]


def _top_p(s: Sampler, ids: np.ndarray, row: np.ndarray):
    p = _probs(row, s.temperature)
    order = np.argsort(-p, kind="stable")
    n = int(np.searchsorted(np.cumsum(p[order]), s.top_p) + 1)
    keep = order[: max(1, min(n, order.size))]
    return ids[keep], row[keep]


def _min_p(s: Sampler, ids: np.ndarray, row: np.ndarray):
    p = _probs(row, s.temperature)
    order = np.argsort(-p, kind="stable")
    keep = order[(p[order] >= s.min_p) | (np.arange(order.size) == 0)]
    return ids[keep], row[keep]


def _tfs(s: Sampler, ids: np.ndarray, row: np.ndarray):
    if row.size < 3 or s.tfs_z >= 1.0:
        return ids, row
    p = _probs(row, s.temperature)
    order = np.argsort(-p, kind="stable")
    d = np.abs(np.diff(p[order], 2))
    d = d / d.sum() if d.sum() > 0 else d
    n = int(np.searchsorted(np.cumsum(d), s.tfs_z, side="left"))
    keep = order[: max(1, n)]
    return ids[keep], row[keep]


def _typical(s: Sampler, ids: np.ndarray, row: np.ndarray):
    if s.typical >= 1.0:
        return ids, row
    p = _probs(row, s.temperature)
    entropy = -np.sum(p * np.log(np.maximum(p, 1e-30)))
    order = np.argsort(np.abs(-np.log(np.maximum(p, 1e-30)) - entropy), kind="stable")
    n = int(np.searchsorted(np.cumsum(p[order]), s.typical) + 1)
    keep = order[: max(1, min(n, order.size))]
    return ids[keep], row[keep]


_STEPS = {"topK": _top_k, "topP": _top_p, "min_p": _min_p, "tfs": _tfs, "typical": _typical}

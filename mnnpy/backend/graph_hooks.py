"""The graph hooks of a backend (Arm NN's ``OptimizeSubgraph``, Glow's ``shouldLower``).

A mixin of :class:`mnnpy.backend.base.Backend`, kept apart so the base stays one screenful of
contract: subgraph substitution (:mod:`mnnpy.substitute`, :mod:`mnnpy.optimization`) and the
lowering choice (:mod:`mnnpy.lowering`). See docs/backend.md, "Subgraph substitution and lowering".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mnnpy.optimization import OptimizationViews

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.optimization import SubgraphView, Substitution

    FusionFinder = Callable[[Any, SubgraphView], list[Substitution]]

__all__ = ["GraphHooks"]


class GraphHooks:
    """Subgraph substitution and lowering hooks, with defaults that change nothing."""

    # -- graph hooks (Arm NN's OptimizeSubgraph, Glow's shouldLower) ----------------------------
    @classmethod
    def register_fusion(cls, finder: FusionFinder) -> FusionFinder:
        """Register ``finder(backend, view) -> [Substitution]`` for :meth:`optimize_subgraph`.

        A decorator, like :meth:`register_creator`; finders of base classes apply too.
        """
        if "_fusion_finders" not in cls.__dict__:
            setattr(cls, "_fusion_finders", [])  # noqa: B010 - per class, made on first use
        cls.__dict__["_fusion_finders"].append(finder)
        return finder

    def optimize_subgraph(self, view: SubgraphView) -> OptimizationViews:
        """Substitute groups of the ops placed here by executions of their own (fusions).

        Asked once per pipeline, on its first resize, after every op is placed and before any
        memory is requested; ``view`` holds this backend's ops in execution order (see
        :mod:`mnnpy.optimization`). Return every node in exactly one substitution, failed view
        (placed again on the next backends) or untouched view. Default: the substitutions the
        registered fusion finders propose (a later one overlapping an earlier one is dropped),
        everything else untouched; with no finders, everything untouched.
        """
        finders = [f for k in type(self).__mro__ for f in k.__dict__.get("_fusion_finders", [])]
        taken: set[int] = set()
        subs = []
        for finder in finders:
            for sub in finder(self, view):
                if not any(id(n) in taken for n in sub.nodes):
                    taken.update(id(n) for n in sub.nodes)
                    subs.append(sub)
        rest = [n for n in view.nodes if id(n) not in taken]
        return OptimizationViews(subs, [], [view.sub_view(rest)] if rest else [])

    def should_lower(self, op: OpDef) -> bool:
        """Whether ``op``, a composite (LayerNorm, GELU, Softmax, Attention), is to be decomposed.

        Asked when the session is built, of the first backend ``op`` would be placed on, for ops
        :mod:`mnnpy.lowering` can decompose (never for those ``lowering.refusal`` refuses, such
        as a ``kv_cache`` Attention, whose state outlives runs); True replaces it by primitive
        ops (BinaryOp, UnaryOp, Reduction, MatMul, ...) that are then placed one by one, and
        offered again (Glow's ``shouldLower``).
        Default: False, keep it whole (it runs where it is supported, else falls back).
        """
        return False

"""The graph hooks of a backend (Arm NN's ``OptimizeSubgraph``, Glow's ``shouldLower``).

A mixin of :class:`mnnpy.backend.base.Backend`, kept apart so the base stays one screenful of
contract: subgraph substitution (:mod:`mnnpy.substitute`, :mod:`mnnpy.optimization`) and the
lowering choice (:mod:`mnnpy.lowering`). See docs/backend.md, "Subgraph substitution and lowering".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from mnnpy.optimization import OptimizationViews

if TYPE_CHECKING:
    from mnnpy.net import OpDef
    from mnnpy.optimization import SubgraphView, Substitution

    FusionFinder = Callable[[Any, SubgraphView], list[Substitution]]

__all__ = ["GraphHooks"]


class GraphHooks:
    """Subgraph substitution and lowering hooks, with defaults that change nothing."""

    # -- graph hooks (Arm NN's OptimizeSubgraph, Glow's shouldLower) ----------------------------
    @overload
    @classmethod
    def register_fusion(
        cls, finder: FusionFinder, *, requires: Iterable[int] = ()
    ) -> FusionFinder: ...

    @overload
    @classmethod
    def register_fusion(
        cls, *, requires: Iterable[int]
    ) -> Callable[[FusionFinder], FusionFinder]: ...

    @classmethod
    def register_fusion(
        cls, finder: FusionFinder | None = None, *, requires: Iterable[int] = ()
    ) -> Any:
        """Register ``finder(backend, view) -> [Substitution]`` for :meth:`optimize_subgraph`.

        A decorator, like :meth:`register_creator`; finders of base classes apply too.
        ``requires`` names op types (``OpType`` values) the finder's pattern cannot do without:
        a view that lacks one of them is not shown to the finder, and a pipeline no finder
        can match skips the substitution pass (:mod:`mnnpy.substitute`). Used as
        ``@Backend.register_fusion(requires=(OpType.MatMul, OpType.Softmax))``.
        """
        if finder is None:
            return lambda f: cls.register_fusion(f, requires=requires)
        for name, empty in (("_fusion_finders", list), ("_fusion_requires", dict)):
            if name not in cls.__dict__:
                setattr(cls, name, empty())  # per class, made on first use
        cls.__dict__["_fusion_finders"].append(finder)
        cls.__dict__["_fusion_requires"][finder] = frozenset(int(t) for t in requires)
        return finder

    @classmethod
    def fusion_finders(cls, types: Iterable[int] | None = None) -> list[FusionFinder]:
        """The registered finders (base classes' too) that can match op types ``types``.

        Those whose required op types are all in ``types``; with None, all of them.
        """
        present = None if types is None else frozenset(int(t) for t in types)
        found = []
        for k in cls.__mro__:
            requires = k.__dict__.get("_fusion_requires", {})
            for f in k.__dict__.get("_fusion_finders", []):
                if present is None or requires.get(f, frozenset()) <= present:
                    found.append(f)
        return found

    def optimize_subgraph(self, view: SubgraphView) -> OptimizationViews:
        """Substitute groups of the ops placed here by executions of their own (fusions).

        Asked once per pipeline, on its first resize, after every op is placed and before any
        memory is requested; ``view`` holds this backend's ops in execution order (see
        :mod:`mnnpy.optimization`). Return every node in exactly one substitution, failed view
        (placed again on the next backends) or untouched view. Default: the substitutions the
        registered fusion finders propose (a later one overlapping an earlier one is dropped),
        everything else untouched; with no finders, everything untouched.
        """
        finders = type(self).fusion_finders(n.op.type for n in view.nodes)
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

"""Show a memory plan and count a model's weight bytes.

A per-buffer table and an SVG timeline (offset against op index); the weight bytes a model
stores next to the STATIC bytes a session holds for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from mnnpy.errors import MNNError
from mnnpy.memory import Block, MemoryPlan
from mnnpy.net import OpType
from mnnpy.weights import conv_bias, conv_table, inner_product_table

__all__ = ["WeightBytes", "plan_table", "plan_svg", "weight_bytes"]

_CONV_TYPES = (
    OpType.Convolution,
    OpType.ConvolutionDepthwise,
    OpType.Deconvolution,
    OpType.DeconvolutionDepthwise,
)


@dataclass(frozen=True)
class WeightBytes:
    """Weight tables (and biases) of the ops that hold their weights as STATIC memory.

    These are convolutions, deconvolutions and InnerProduct.

    Attributes:
        stored: bytes the file spends on them (codes and scales as stored, float32 biases).
        float32: bytes they take as float32 (what NORMAL mode decodes them to, before any
            transform such as Winograd's).
        ops: how many ops were counted.
    """

    stored: int
    float32: int
    ops: int


def weight_bytes(session: Any) -> WeightBytes:
    """Count the weight tables of ``session``'s ops (decoding each once).

    Ops whose tables the decoders refuse (e.g. int8 ``symmetricQuan`` convolutions, which keep
    their own tables) are not counted.
    """
    stored = as_float = ops = 0
    for pipeline in session.pipelines:
        for unit in (m for u in pipeline.units for m in u.members()):
            op, p = unit.op, unit.op.param
            if p is None or len(unit.inputs) > 1 and op.type in _CONV_TYPES:
                continue  # no table, or weights arriving as input tensors
            try:
                if op.type in _CONV_TYPES and getattr(p, "common", None) is not None:
                    table, bias = conv_table(op), conv_bias(op).nbytes
                elif op.type == OpType.InnerProduct and unit.inputs[0].ndim == 2:
                    table = inner_product_table(op, unit.inputs[0].shape[1])
                    bias = 4 * len(p.bias) if p.biasTerm and p.bias is not None else 0
                else:
                    continue
            except MNNError:
                continue  # not a table these decoders read (see the docstring)
            stored += table.stored_bytes + bias
            as_float += 4 * table.codes.size + bias
            ops += 1
    return WeightBytes(stored, as_float, ops)


_COLORS = {"tensor": "#4e79a7", "scratch": "#f28e2b"}


def _span(block: Block, last_op: int) -> tuple[int, int]:
    """First and last op index of a block; a never-released buffer lives to the last op."""
    start = max(block.first_op, 0)
    end = last_op if block.end == float("inf") else max(block.last_op, start)
    return start, end


def plan_table(plan: MemoryPlan, op_names: dict[int, str]) -> str:
    """One line per planned buffer: lifetime in ops, offset, size, kind, name."""
    last_op = max(op_names, default=0)
    lines = [f"{'first':>5} {'last':>5} {'offset':>10} {'bytes':>10}  kind     name"]
    for b in sorted(plan.blocks, key=lambda b: (b.first_op, b.offset)):
        start, end = _span(b, last_op)
        lines.append(f"{start:>5} {end:>5} {b.offset:>10} {b.size:>10}  {b.kind:<8} {b.label}")
    return "\n".join(lines)


def plan_svg(
    plan: MemoryPlan, op_names: dict[int, str], width: int = 1000, height: int = 600
) -> str:
    """An SVG picture of the plan: one rectangle per buffer, x = ops alive, y = arena offset."""
    last_op = max(op_names, default=0)
    arena = max(plan.arena_size, 1)
    left, top, bottom = 70, 30, 40
    plot_w, plot_h = width - left - 10, height - top - bottom
    x_unit = plot_w / (last_op + 1)

    def x(op: int) -> float:
        return left + op * x_unit

    def y(offset: int) -> float:
        return top + plot_h * (1 - offset / arena)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18">arena {plan.arena_size} B, lower bound {plan.lower_bound} B, '
        f"{len(plan.blocks)} buffers (blue: tensors, orange: scratch)</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>',
        f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">op index</text>',
        f'<text x="4" y="{top + 10}">{arena} B</text>',
        f'<text x="4" y="{top + plot_h}">0</text>',
    ]
    step = max(1, (last_op + 1) // 10)
    for op in range(0, last_op + 1, step):
        parts.append(
            f'<text x="{x(op):.1f}" y="{top + plot_h + 14}" text-anchor="middle">{op}</text>'
        )
    for b in plan.blocks:
        start, end = _span(b, last_op)
        x0, x1 = x(start), x(end + 1)
        y0, y1 = y(b.offset + b.size), y(b.offset)
        title = escape(f"{b.label} ({b.kind}): {b.size} B at {b.offset}, ops {start}..{end}")
        parts.append(
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{max(y1 - y0, 0.5):.1f}" fill="{_COLORS.get(b.kind, "#999")}" '
            f'fill-opacity="0.75" stroke="black" stroke-width="0.3"><title>{title}</title></rect>'
        )
    parts.append("</svg>")
    return "\n".join(parts)

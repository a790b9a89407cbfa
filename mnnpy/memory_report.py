"""Show a memory plan: a per-buffer table and an SVG timeline (offset against op index)."""

from __future__ import annotations

from html import escape

from mnnpy.memory import Block, MemoryPlan

__all__ = ["plan_table", "plan_svg"]

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

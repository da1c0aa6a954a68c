"""A batch's dependency graph as SVG, drawn on the server: readable without JavaScript and on a phone.

The layout is layered: a job sits one row below the lowest of its dependencies inside the batch (the
jobs without any start at the top), so every arrow points down. A row holds at most ``COLUMNS`` jobs and
wraps onto more rows beyond that, which keeps the drawing ``WIDTH`` (280) px wide whatever the batch: it
fits a 390 px phone at its own size, and a wide fan-out grows down, not sideways. Each job is a link to its
page, coloured by status and labelled with its id and status in words (colour is never the only sign).

The markup is built as text in one pass rather than in a template loop: a batch of 1,000 jobs is drawn in
a few milliseconds (docs/batches.md#measured).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

COLUMNS = 3
NODE_W, NODE_H = 80, 36
GAP_X, GAP_Y = 12, 22
PAD = 6
WIDTH = PAD * 2 + COLUMNS * NODE_W + (COLUMNS - 1) * GAP_X


@dataclass(frozen=True)
class Node:
    """One member of the batch as the drawing needs it."""

    id: int
    status: str
    type: str
    depends_on: Sequence[int] = ()


def layers(nodes: Sequence[Node]) -> list[list[Node]]:
    """The nodes by depth: a node's depth is one more than the deepest of its dependencies among
    ``nodes`` (dependencies outside the batch do not count). A dependency always has a smaller id than
    its dependent (it existed first), so one pass in id order finds every depth."""
    depth: dict[int, int] = {}
    rows: list[list[Node]] = []
    for node in sorted(nodes, key=lambda n: n.id):
        level = 1 + max((depth[d] for d in node.depends_on if d in depth), default=-1)
        depth[node.id] = level
        while len(rows) <= level:
            rows.append([])
        rows[level].append(node)
    return rows


def draw(
    nodes: Sequence[Node],
    job_path: str,
    status_names: Mapping[str, str],
    title: str,
) -> Markup:
    """The SVG of the batch's graph; a job's page is ``job_path`` and its id, ``status_names`` gives the
    translated status words, ``title`` the drawing's accessible name."""
    places: dict[int, tuple[int, int]] = {}  # id -> the centre of its box's top edge (x, y)
    boxes: list[str] = []
    path = escape(job_path)
    escaped: dict[str, Markup] = {}  # each status and type escaped once, not once per job

    def once(text: str) -> Markup:
        if text not in escaped:
            escaped[text] = escape(text)
        return escaped[text]

    row = 0
    for layer in layers(nodes):
        for start in range(0, len(layer), COLUMNS):
            y = PAD + row * (NODE_H + GAP_Y)
            for column, node in enumerate(layer[start : start + COLUMNS]):
                x = PAD + column * (NODE_W + GAP_X)
                places[node.id] = (x + NODE_W // 2, y)
                word = once(status_names.get(node.status, node.status))
                boxes.append(
                    f'<a href="{path}{node.id}" class="node g-{once(node.status)}">'
                    f"<title>#{node.id} {once(node.type)}: {word}</title>"
                    f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="5"/>'
                    f'<text x="{x + NODE_W // 2}" y="{y + 15}" class="id">#{node.id}</text>'
                    f'<text x="{x + NODE_W // 2}" y="{y + 29}">{word}</text></a>'
                )
            row += 1
    edges: list[str] = []
    for node in nodes:
        x2, y2 = places[node.id]
        for dependency in node.depends_on:
            if dependency in places:
                x1, y1 = places[dependency]
                edges.append(f'<line x1="{x1}" y1="{y1 + NODE_H}" x2="{x2}" y2="{y2 - 2}"/>')
    height = PAD * 2 + max(row, 1) * (NODE_H + GAP_Y) - GAP_Y
    return Markup(
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}">'
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker></defs>'
        f'<g class="edges">{"".join(edges)}</g><g class="nodes">{"".join(boxes)}</g></svg>'
    )

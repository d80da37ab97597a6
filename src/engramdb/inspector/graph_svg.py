"""A graph of entities and relations as an SVG picture (pure): entities on a circle, coloured
by type, relations as arrows labelled with their type. No layout library and no script: the
page stays a static file a browser shows as it is."""

from __future__ import annotations

import math
from collections.abc import Sequence

from engramdb.inspector.html import esc
from engramdb.providers.graph.types import GraphEntity, GraphRelation

_TYPE_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")


def graph_svg(
    entities: Sequence[GraphEntity], relations: Sequence[GraphRelation], size: int = 560
) -> str:
    """``entities`` and the ``relations`` between them as one ``<svg>`` element (relations
    touching an entity not shown are left out)."""
    if not entities:
        return "<p class=muted>no entities</p>"
    centre, radius = size / 2, size / 2 - 70
    places: dict[str, tuple[float, float]] = {}
    for i, entity in enumerate(entities):
        angle = 2 * math.pi * i / len(entities) - math.pi / 2
        places[entity.entity_id] = (
            centre + radius * math.cos(angle),
            centre + radius * math.sin(angle),
        )
    types = sorted({e.entity_type for e in entities})
    colour = {t: _TYPE_COLOURS[i % len(_TYPE_COLOURS)] for i, t in enumerate(types)}
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{size}' height='{size}' "
        f"viewBox='0 0 {size} {size}' role='img' aria-label='entity graph'>",
        "<defs><marker id='arrow' viewBox='0 0 10 10' refX='16' refY='5' markerWidth='6' "
        "markerHeight='6' orient='auto'><path d='M0,0 L10,5 L0,10 z' fill='#8a93a5'/></marker>"
        "</defs>",
    ]
    for relation in relations:
        if relation.source_id not in places or relation.target_id not in places:
            continue
        (x1, y1), (x2, y2) = places[relation.source_id], places[relation.target_id]
        parts.append(
            f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' stroke='#8a93a5' "
            "marker-end='url(#arrow)'/>"
            f"<text x='{(x1 + x2) / 2:.1f}' y='{(y1 + y2) / 2 - 3:.1f}' fill='#5b6475' "
            f"text-anchor='middle'>{esc(relation.relation_type)}</text>"
        )
    for entity in entities:
        x, y = places[entity.entity_id]
        parts.append(
            f"<circle cx='{x:.1f}' cy='{y:.1f}' r='7' fill='{colour[entity.entity_type]}'>"
            f"<title>{esc(entity.entity_type)} {esc(entity.entity_id)}</title></circle>"
            f"<text x='{x:.1f}' y='{y + 19:.1f}' text-anchor='middle'>{esc(entity.name)}</text>"
        )
    parts.append("</svg>")
    legend = " ".join(
        f"<span class=chip style='background:{colour[t]};color:#fff'>{esc(t)}</span>" for t in types
    )
    return "".join(parts) + f"<p>{legend}</p>"

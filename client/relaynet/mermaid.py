"""Mermaid rendering of a network graph (control_get_graph's ``{nodes, edges}``): pure text, no I/O.

`relaynet graph` prints it; the hub never renders one (it answers ``{nodes, edges}``), so it lives
with the client (it was ``relaynet.control.render``)."""

from __future__ import annotations

from typing import Any


def mermaid(g: dict[str, Any]) -> str:
    """``{nodes, edges}`` as a Mermaid ``flowchart LR`` (for a README or a terminal)."""
    def nid(raw: str) -> str:
        return "n_" + "".join(c if c.isalnum() else "_" for c in raw)

    shapes = {"agent": ("[", "]"), "instance": ("(", ")"), "group": ("{{", "}}"), "resource": ("[(", ")]"),
              "representative": ("[/", "/]")}
    lines = ["flowchart LR"]
    known = set()
    for n in g["nodes"]:
        left, right = shapes.get(n["kind"], ("[", "]"))
        label = n["label"].replace('"', "'")
        lines.append(f'  {nid(n["id"])}{left}"{label}"{right}')
        known.add(n["id"])
    for e in g["edges"]:
        for end in (e["from"], e["to"]):
            if end not in known:
                lines.append(f'  {nid(end)}["{end.split(":", 1)[1]}"]')
                known.add(end)
        label = e["kind"] + (f": {e['label']}" if e.get("label") else "")
        arrow = "-.->" if e["kind"] in ("serves", "member") else "-->"
        lines.append(f'  {nid(e["from"])} {arrow}|"{label}"| {nid(e["to"])}')
    return "\n".join(lines) + "\n"

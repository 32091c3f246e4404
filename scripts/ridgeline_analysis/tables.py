"""Tables of the scripts' results as text: aligned columns for a terminal, or markdown for a
results page."""
from __future__ import annotations

from typing import Sequence


def format_columns(head: Sequence[str], body: Sequence[Sequence[str]], left: int = 1,
                   markdown: bool = False) -> str:
    """`head` and the `body` rows (strings) as markdown, or as text columns two spaces apart,
    the first `left` left-aligned and the others right-aligned, each as wide as its widest
    cell. Every line ends in a newline."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.ljust(w) if i < left else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head)] + [line(cells) for cells in body]) + "\n"

"""The pieces every HTML section is made of: escaped text, a table, inline figures. Apart from
html.py (the page) so that a unit's own section (report/sections.py) builds with them without
importing the page that lays the sections out."""

from __future__ import annotations

import base64
import html
import re
import secrets
from contextlib import contextmanager
from contextvars import ContextVar


def escape_html(text) -> str:
    return html.escape(str(text), quote=True)


def html_table(headers, rows, numeric=frozenset(), row_classes=None, cell_classes=None, wrap=frozenset()) -> str:
    out = ['<div class="scroll"><table><thead><tr>', *(f"<th>{escape_html(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes else ""
        out.append(f'<tr class="{cls}">' if cls else "<tr>")
        for j, cell in enumerate(row):
            classes = []
            if j in numeric:
                classes.append("num")
            if j in wrap:
                classes.append("wrap")
            if cell_classes and cell_classes.get(j):
                classes.append(cell_classes[j](cell))
            attr = f' class="{" ".join(c for c in classes if c)}"' if classes else ""
            out.append(f"<td{attr}>{escape_html(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


# While a page is built (figures_drawn_together), each figure's place: drawn all at once at the end.
_batch: ContextVar[_FigureBatch | None] = ContextVar("figure_batch", default=None)


class _FigureBatch:
    """The figures of one page, each with a placeholder in the page's text that `fill` replaces
    with the encoded figure; the placeholders carry a random token, which no text of the page has."""

    def __init__(self) -> None:
        self.items: list = []
        self.token = secrets.token_hex(8)

    def place(self, drawing, kind: str) -> str:
        self.items.append((drawing, kind))
        return f"\x00{self.token}:{len(self.items) - 1}\x00"

    def fill(self, text: str) -> str:
        if not self.items:
            return text
        from tpubench.output.report.figures import encode_drawings

        urls = [_data_url(mime, blob) for mime, blob in encode_drawings(self.items)]
        return re.sub(f"\x00{self.token}:(\\d+)\x00", lambda m: urls[int(m.group(1))], text)


@contextmanager
def figures_drawn_together():
    """Within it, html_figures leaves a placeholder for each figure; the batch's `fill(page)`
    draws every figure not cached at once (side by side on the CPUs, report/figure_cache.py)."""
    batch = _FigureBatch()
    reset = _batch.set(batch)
    try:
        yield batch
    finally:
        _batch.reset(reset)


def _data_url(mime: str, blob: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(blob).decode('ascii')}"


def html_figures(data, make=None) -> str:
    """The figures `make(data)` lists, (id, caption, figure_cache.Drawing, kind) each (default:
    figures.report_drawings), inline; a figure cached from equal inputs is not drawn."""
    from tpubench.output.report.figures import encode_drawing, report_drawings

    parts = []
    batch = _batch.get()
    for fig_id, caption, drawing, kind in (make or report_drawings)(data):
        src = batch.place(drawing, kind) if batch is not None else _data_url(*encode_drawing(drawing, kind))
        parts.append(f'<figure id="{escape_html(fig_id)}"><img class="figure" alt="{escape_html(caption)}" '
                     f'src="{src}"><figcaption>{escape_html(caption)}</figcaption></figure>')
    return "".join(parts)


__all__ = ["escape_html", "figures_drawn_together", "html_figures", "html_table"]

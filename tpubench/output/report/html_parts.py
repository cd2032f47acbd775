"""The pieces every HTML section is made of: escaped text, a table, inline figures. Apart from
html.py (the page) so that a unit's own section (report/sections.py) builds with them without
importing the page that lays the sections out."""

from __future__ import annotations

import base64
import html


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


def html_figures(data, make=None) -> str:
    """The figures `make(data)` lists, (id, caption, figure_cache.Drawing, kind) each (default:
    figures.report_drawings), inline; a figure cached from equal inputs is not drawn."""
    from tpubench.output.report.figures import encode_drawing, report_drawings

    parts = []
    for fig_id, caption, drawing, kind in (make or report_drawings)(data):
        mime, blob = encode_drawing(drawing, kind)
        encoded = base64.b64encode(blob).decode("ascii")
        parts.append(f'<figure id="{escape_html(fig_id)}"><img class="figure" alt="{escape_html(caption)}" '
                     f'src="data:{mime};base64,{encoded}"><figcaption>{escape_html(caption)}</figcaption></figure>')
    return "".join(parts)


__all__ = ["escape_html", "html_figures", "html_table"]

"""Text from result files made safe to show: on a terminal, in Markdown and in HTML.

A result file may come from anyone (a colleague, a bucket, a hand edit), so any text in it (a
workload name, an error, a warning) is untrusted:

* `terminal_text` removes control characters before anything reaches a terminal: ESC starts
  sequences that clear the screen, retitle the window, move the cursor or write a hyperlink
  (`\\x1b]8;;...`), and BEL, backspace, carriage return and the C1 controls (U+0080..U+009F,
  CSI among them) can overwrite what was printed. Bidirectional overrides and isolates
  (U+202A..U+202E, U+2066..U+2069) reorder what is shown ("Trojan Source"). Tab and newline
  stay. Every one of them is removed, not replaced: a name with one shows without it.
* `escape` is that plus rich's markup escape, for text printed through a rich console (a `[red]`
  in a workload name is then shown, never obeyed).
* `markdown_text` writes every `<` as the entity `&lt;` (which a viewer shows as `<`): Markdown
  renderers pass raw HTML through, so a `<script>` in a workload name would run where the report
  is viewed, and every kind of raw HTML (tag, comment, declaration, autolink) starts with `<`.
  `>` and `&` stay as they are, so `TTFT p99 400 ms > 200 ms` still reads well on a terminal
  (`&lt;b&gt;` written by someone is shown as that text, never parsed as a tag). It also strips
  the control characters above. tpubench's Markdown writes no HTML of its own.
"""

from __future__ import annotations

import re

# C0 controls except tab (09) and newline (0a), DEL, C1 controls, bidi embeddings/overrides/isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """`text` without control characters (module docstring); tab and newline kept."""
    return _CONTROLS.sub("", text)


def escape(text: str) -> str:
    """`text` safe for a rich console: no control characters, markup shown as written."""
    from rich.markup import escape as rich_escape

    return rich_escape(terminal_text(text))


def markdown_text(text: str) -> str:
    """`text` safe inside Markdown: no control characters, no raw HTML (module docstring)."""
    return terminal_text(text).replace("<", "&lt;")

"""Each unit of output's report section (markdown and HTML alike): a table owned by the reports, by
unit key (a unit's scenario below names no report function); any other unit gets the shared
section (report/units.py)."""

from __future__ import annotations

from tpubench.output.report import images, tokens, training, units

SECTIONS = {
    "token": tokens.section,
    "training_token": training.section,
    "image": images.section,
}


def section_of(unit):
    """The report section of `unit` (SECTIONS, else the shared one): (data, fmt, unit, ...) -> lines."""
    return SECTIONS.get(unit.key, units.section)


__all__ = ["SECTIONS", "section_of"]

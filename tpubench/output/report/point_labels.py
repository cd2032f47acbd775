"""How the report's tables name a point of each unit of output: a table owned by the reports, by
unit key (a unit's scenario below names no report function); any other unit's points by their
scenario's row label."""

from __future__ import annotations

from typing import Callable

from tpubench.output.report import format as f
from tpubench.output.report import images
from tpubench.scenarios.registry import row_label

POINT_LABELS: dict[str, Callable[[object], str]] = {
    "token": f.point_label,
    "training_token": f.train_point_label,
    "image": images.point_label,
}


def point_label_of(unit) -> Callable[[object], str]:
    """How tables of `unit` name a point (POINT_LABELS, else its scenario's row label)."""
    return POINT_LABELS.get(unit.key, row_label)


__all__ = ["POINT_LABELS", "point_label_of"]

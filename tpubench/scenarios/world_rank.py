"""One rank of a world tpubench started for a point: `python -m tpubench.scenarios.world_rank SPEC`.

measure.world.run_in_world launches it on every rank (measure.world.RANK_MODULE). The launcher and the
rank's join-and-report steps are generic (measure.world.worker_main); which scenario's part of a rank
to run comes from the registry, by the point's kind. It lives here, beside the registry, because
the scenarios use measure/world.py: world.py importing them back would be a cycle.
"""

from __future__ import annotations

import sys

from tpubench.measure.world import worker_main
from tpubench.scenarios.registry import measurement_of


def in_world_of(kind: str):
    """The scenario's part of one rank (Measurement.in_world) for a point of `kind`."""
    return measurement_of(kind).in_world


if __name__ == "__main__":
    worker_main(sys.argv[1], in_world_of)

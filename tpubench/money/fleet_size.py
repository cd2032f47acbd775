"""Whole instances for a fleet: the one rule a fleet is sized by wherever tpubench sizes one (the
budgets, budget/fleet.py; an answer's fleet at a volume can call it too). Pure arithmetic on
rates and chip counts; nothing here names a unit of output.

For a peak of R units/s on a point making `rate` units/s per chip, a replica of `chips` chips and
an instance (the price row's: what can be rented) of `chips_per_instance` chips:

    replicas  = ceil(R / (rate * chips))
    instances = ceil(replicas / floor(chips_per_instance / chips))   when a replica fits an instance
              = replicas * ceil(chips / chips_per_instance)          when it spans several

so a 1-GPU replica on an 8-GPU machine packs 8 to the machine, and a 16-chip one spans two.
"""

from __future__ import annotations

import numpy as np

# Guards ceil() against float noise: 3.0000000000004 replicas is 3 replicas, not 4.
_CEIL_EPS = 1e-9


def ceil_whole(x) -> np.ndarray:
    return np.ceil(np.asarray(x, dtype=float) - _CEIL_EPS)


def instances_needed(replicas, chips_per_replica, chips_per_instance) -> np.ndarray:
    """Whole instances for `replicas` replicas of `chips_per_replica` chips each."""
    replicas = np.asarray(replicas, dtype=float)
    per_replica = np.asarray(chips_per_replica, dtype=float)
    per_instance = np.asarray(chips_per_instance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas_per_instance = np.floor(per_instance / per_replica)
        fits = replicas_per_instance >= 1
        packed = ceil_whole(replicas / np.where(fits, replicas_per_instance, 1))
        spanning = replicas * ceil_whole(per_replica / per_instance)
    return np.where(fits, packed, spanning)


def whole_instances(peak_per_s, rate_per_chip, chips_per_replica, chips_per_instance) -> tuple[np.ndarray, np.ndarray]:
    """(replicas, instances) a peak of `peak_per_s` units/s needs (module notes)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        replicas = ceil_whole(np.divide(peak_per_s, np.multiply(rate_per_chip, chips_per_replica)))
    return replicas, instances_needed(replicas, chips_per_replica, chips_per_instance)


__all__ = ["ceil_whole", "instances_needed", "whole_instances"]

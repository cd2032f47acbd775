"""Measurement: the sweep runner, fenced timing, statistics, numerics, validity, provenance and the
world of ranks a point runs on."""

"""A demo scenario with a unit of output tpubench does not ship: speech transcription, priced per
1,000 seconds of audio transcribed. It is one package (this one) plus one registry line (the test,
tests/test_demo_unit.py, adds `Transcribe()` to `registry.SCENARIOS`), and nothing else: cost,
energy, the console's run-cost table and the md/HTML/CSV reports price and show it from the unit
declared below (docs/extending/scenario.md#unit-of-output).

It measures nothing (no `measurement` module): its results are written by the test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from tpubench.scenarios import Scenario
from tpubench.scenarios.output_units import CI_BOUNDS, OutputUnit

AUDIO_SECONDS = OutputUnit(
    key="audio_second", singular="audio second", plural="audio seconds", title="Transcription",
    figures=("audio",), chip_s_suffix="_chip_s_per_audio_s",            # written by cost.chip_seconds below
    price_scale=1e3, priced_suffix="_usd_per_kaudio_s", price_words="$/1k audio s",
    headline="audio_usd_per_kaudio_s", headline_words="$ per 1,000 audio seconds",
    throughput="audio_s_per_s", throughput_words="audio s/s per chip", throughput_format=",.1f",
    performance=("audio_s_per_s", "audio_s_per_s_per_chip", "audio_s_per_s_per_chip_ci95_low",
                 "audio_s_per_s_per_chip_ci95_high", "word_error_rate"),
    energy_suffix="_j_per_audio_s", energy_bounds=CI_BOUNDS,
    carbon_figure="audio", per_kwh_column="audio_s_per_kwh",
    basis_words="transcription",
    # `tpubench budget --volume audio_second=AMOUNT` (a day's audio seconds) sizes it with the planner
    # of any unit without one of its own (money/unit_budget.py): nothing to declare.
)


class TranscribeSection(BaseModel):
    kind: Literal["transcribe"] = "transcribe"
    clip_s: float = 30.0


@dataclass(frozen=True, kw_only=True)
class Transcribe(Scenario):
    kind: str = "transcribe"
    schema: str = "demo_scenario:TranscribeSection"
    measurement: str = "demo_scenario.measure:TranscribeRun"   # never imported: the test writes results
    cost_basis: str = "demo_scenario.cost:chip_seconds"
    report_kind: str = "transcription"
    units: tuple = (AUDIO_SECONDS,)
    builds_model: bool = False

    def label(self, point):
        return f"clip {point.params.get('clip_s')}s"

    def pair_label(self, point):
        return f"{point.get('workload')} clip {point.get('params', {}).get('clip_s')}s"

    def row_label(self, row):
        return f"asr x{row.get('batch_size')} {row.get('device')}"

"""The unit of output a scenario is priced in (tokens, training tokens, images, ...): what the shared
layers (cost, energy, console, reports, budget) need to know of it, declared once by the package
that owns the unit (docs/extending/scenario.md#unit-of-output).

Shared code loops over the registry's units (`registry.UNITS`) and never names a unit's columns.
This module is a description: it imports nothing beyond the standard library, so `validate` and
CLI start-up stay light. A unit names no function of the layers above it (prices, reports, the
console, the budget): those keep their own tables by unit key, each with a default (the comment on
`OutputUnit` says where).
"""

from __future__ import annotations

from dataclasses import dataclass

CI_BOUNDS = ("", "_ci95_low", "_ci95_high")


@dataclass(frozen=True)
class OutputUnit:
    key: str                      # a unit's name in code and data ("token", "training_token", "image")
    singular: str                 # in words: "token", "training token", "image"
    plural: str
    title: str                    # its tables' heading word: "Inference", "Training", "Images"
    # The chip-seconds its cost basis writes (scenario.cost_basis): for each figure F, the column
    # `F{chip_s_suffix}` with its `_ci95_low` / `_ci95_high` bounds (docs/extending/scenario.md#cost).
    figures: tuple[str, ...]      # ("input", "output", "blended"), ("train",), ("image",)
    chip_s_suffix: str            # "_chip_s_per_token", "_chip_s_per_image"
    # Priced at p USD per chip-second: `F{priced_suffix}` = chip-seconds * p * price_scale (CI alike).
    price_scale: float            # 1e6: per million tokens; 1e3: per 1,000 images
    priced_suffix: str            # "_usd_per_mtok", "_usd_per_kimage"
    price_words: str              # the priced column in a table heading: "$/Mtok", "$/1k images"
    headline: str                 # the cost column rows of this unit are ranked by (cheapest point)
    headline_words: str           # that column in words: "blended $/Mtok", "$ per 1,000 images"
    # Measured rate: `throughput` (with `_ci95_low` / `_ci95_high` on the result where measured) and
    # its per-chip figures `throughput_per_chip[...]` = rate / chips, written for every priced row.
    throughput: str               # "output_tokens_per_s", "train_tokens_per_s", "images_per_s"
    throughput_words: str         # "tok/s per chip"
    throughput_format: str        # format spec of the per-chip rate in a table (",.1f")
    # Result columns carried into every priced row (NaN where a row has none), before its costs.
    performance: tuple[str, ...] = ()
    # Columns its cost basis writes beside the chip-seconds (e.g. how input and output were split),
    # and those money derives for it once priced (money/cost.EXTRA_COSTS); both land among the
    # unit's priced columns.
    basis_labels: tuple[str, ...] = ()
    extra_cost_columns: tuple[str, ...] = ()
    # Energy (money/energy.py): `F{energy_suffix}{bound}` = chip-seconds * joules per chip-second,
    # for each figure and each bound in `energy_bounds`.
    energy_suffix: str = "_j_per_unit"
    energy_bounds: tuple[str, ...] = ("",)
    # The figure carbon is given for (`F_gco2e` + the priced suffix's scale, e.g.
    # blended_gco2e_per_mtok) and the column of units per kWh of that figure; None: none.
    carbon_figure: str | None = None
    per_kwh_column: str | None = None
    # What the layers above make of a unit is theirs, in tables keyed by the unit's key, each with a
    # default any new unit gets: the console's table after a run (console.render_run_cost), the
    # report's section and point label (output/report/sections.py, point_labels.py), the budget
    # planner (budget/planners.PLANNERS) and what pricing derives (money/cost.EXTRA_COSTS).
    # The `cost_basis` column of the CSV report's summary rows.
    basis_words: str = "inference"

    # ------------------------------------------------------------------ columns, derived

    @property
    def scale_words(self) -> str:
        """The price scale in words: "million", "1,000"."""
        return "million" if self.price_scale == 1e6 else f"{self.price_scale:,.0f}"

    def chip_seconds_columns(self) -> list[str]:
        return [f"{f}{self.chip_s_suffix}{b}" for f in self.figures for b in CI_BOUNDS]

    def priced_column(self, chip_s_column: str) -> str:
        """`X_chip_s_per_token` -> `X_usd_per_mtok` (bounds kept)."""
        return chip_s_column.replace(self.chip_s_suffix, self.priced_suffix)

    def priced_columns(self) -> list[str]:
        return [self.priced_column(c) for c in self.chip_seconds_columns()]

    def per_chip_columns(self) -> list[str]:
        return [f"{self.throughput}_per_chip{b}" for b in CI_BOUNDS]

    def cost_columns(self) -> list[str]:
        """Every column pricing writes for this unit, in the order reports list them."""
        return self.priced_columns() + list(self.extra_cost_columns) + self.chip_seconds_columns() + list(self.basis_labels)

    def energy_columns(self) -> list[str]:
        return [f"{f}{self.energy_suffix}{b}" for f in self.figures for b in self.energy_bounds]

    def carbon_column(self) -> str | None:
        return None if self.carbon_figure is None else f"{self.carbon_figure}{self.priced_suffix.replace('_usd_', '_gco2e_')}"

    def headline_energy(self) -> str | None:
        return None if self.carbon_figure is None else f"{self.carbon_figure}{self.energy_suffix}"

"""What a workload's answer is decided at: the service level one user must get (`slo:`) and the
volume the fleet must serve (`volume:`), at the workload's top level, for every scenario.

    slo: {ttft_s: 2.0, tpot_s: 0.05, percentile: 99}        # or output_tokens_per_s_per_user: 20
    volume: {tokens_per_day: 1.0e9, peak_factor: 2}

`percentile` is the share of requests each bound holds for (MLPerf's Server constraints hold at
the 99th). Output tokens/s per user is 1 / TPOT: give one or the other. Pure schema, no framework:
the loader validates it (run/workload.py) and the answer reads it (output/answer/service_level.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tpubench.workload_spec.sections import MAX_SECONDS, Strict

# The percentiles results and published rows give a latency at (others are asked of a lognormal
# between the median and the 99th: output/answer/service_level.at_percentile).
PERCENTILES = (50, 90, 95, 99)
# A day of tokens beyond any fleet (1e18: a million times the largest published serving volumes).
MAX_TOKENS_PER_DAY = 1e18

Bound = Annotated[float, Field(gt=0, le=MAX_SECONDS)]


class ServiceLevel(Strict):
    ttft_s: Bound | None = None
    tpot_s: Bound | None = None
    output_tokens_per_s_per_user: Annotated[float, Field(gt=0, le=1e6)] | None = None
    percentile: Literal[50, 90, 95, 99] = 99

    @model_validator(mode="after")
    def _one_bound_at_least(self):
        if self.ttft_s is None and self.tpot_s is None and self.output_tokens_per_s_per_user is None:
            raise ValueError("an slo needs a bound: ttft_s, tpot_s or output_tokens_per_s_per_user")
        if self.tpot_s is not None and self.output_tokens_per_s_per_user is not None:
            raise ValueError("give tpot_s or output_tokens_per_s_per_user (= 1 / tpot_s), not both")
        return self

    @property
    def tpot_bound_s(self) -> float | None:
        """The TPOT bound, from output tokens/s per user where that is given."""
        if self.output_tokens_per_s_per_user is not None:
            return 1.0 / self.output_tokens_per_s_per_user
        return self.tpot_s


class Volume(Strict):
    tokens_per_day: Annotated[float, Field(gt=0, le=MAX_TOKENS_PER_DAY)]
    peak_factor: Annotated[float, Field(ge=1, le=1e3)] = 1.0


__all__ = ["MAX_TOKENS_PER_DAY", "PERCENTILES", "ServiceLevel", "Volume"]

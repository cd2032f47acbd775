"""The workload schema of scenario `serve`: an OpenAI-compatible server, running or started by
tpubench, measured under load (docs/scenarios/serve.md).

    scenario:
      kind: serve
      server: {url: http://127.0.0.1:8000, model: my-model, hardware: {accelerator: H100, chips: 8}}
      # or: server: {launch: {preset: vllm, model: Qwen/Qwen3-30B-A3B, args: [--tensor-parallel-size, "8"]}}
      load: {concurrency: [1, 8, 32], num_requests: 200, warmup_requests: 8}
      # or: load: {request_rate: [1, 4, inf], burstiness: 1.0, max_concurrency: 64, duration_s: 60}
      input_length: 1024               # or {uniform: [512, 2048]} or {csv: lengths.csv}
      output_length: 256
      slo: {ttft_s: 0.5, tpot_s: 0.05}

Any list is a sweep axis: concurrencies or request rates, and fixed input or output lengths.
"""

from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import BaseModel, Field, PositiveFloat, PositiveInt, field_validator, model_validator

from tpubench.spec.sections import Strict

PRESETS = ("transformers", "vllm", "vllm-tpu", "vllm-neuron", "sglang", "custom")


class UniformLengths(Strict):
    uniform: tuple[PositiveInt, PositiveInt]

    @field_validator("uniform")
    @classmethod
    def _ordered(cls, v):
        if v[0] > v[1]:
            raise ValueError(f"the range [{v[0]}, {v[1]}] is empty: give [low, high]")
        return v


class CsvLengths(Strict):
    csv: str   # a file of input_length,output_length rows (relative to the workload file)


Lengths = Union[PositiveInt, list[PositiveInt], UniformLengths, CsvLengths]


class Launch(Strict):
    """A server tpubench starts on this machine, waits for, measures and always stops."""

    preset: Literal["transformers", "vllm", "vllm-tpu", "vllm-neuron", "sglang", "custom"] = "transformers"
    # What to serve: a local path or a Hub id; "build" makes the workload's model (random weights)
    # and a tokenizer here, with nothing downloaded.
    model: str = "build"
    # The preset's command is used unless given; placeholders {model}, {host}, {port}.
    command: Union[str, list[str], None] = None
    args: list[str] = Field(default_factory=list)       # appended to the preset's command
    host: str = "127.0.0.1"
    port: PositiveInt | None = None                     # default: a free port
    ready_path: str = "/v1/models"
    startup_timeout_s: PositiveFloat = 180.0
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _custom_has_command(self):
        if self.preset == "custom" and not self.command:
            raise ValueError("preset 'custom' needs a command")
        return self


class Hardware(Strict):
    """What a server tpubench did not start runs on (for cost): declared, since it cannot be seen."""

    accelerator: str
    chips: PositiveInt
    instance: str | None = None


class Server(Strict):
    url: str | None = None          # a running server: http://host:port (its OpenAI API under /v1)
    model: str | None = None        # the served model's name (default: the first of /v1/models)
    launch: Launch | None = None
    hardware: Hardware | None = None
    tokenizer: str | None = None    # to make prompts of exact token lengths (default: the served model's)

    @model_validator(mode="after")
    def _one_source(self):
        if (self.url is None) == (self.launch is None):
            raise ValueError("give either url (a running server) or launch (tpubench starts one)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        return self


class Load(Strict):
    concurrency: Union[PositiveInt, list[PositiveInt], None] = None       # closed loop
    request_rate: Union[PositiveFloat, list[PositiveFloat], None] = None  # open loop, requests/s (.inf allowed)
    burstiness: PositiveFloat = 1.0          # Gamma shape of the gaps: 1 = Poisson, < 1 burstier
    max_concurrency: PositiveInt | None = None
    num_requests: PositiveInt | None = 64
    duration_s: PositiveFloat | None = None  # instead of num_requests: send for this long
    warmup_requests: int = Field(2, ge=0)

    @model_validator(mode="after")
    def _one_loop(self):
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give either concurrency (closed loop) or request_rate (open loop)")
        if self.concurrency == [] or self.request_rate == []:
            raise ValueError("an empty list sweeps over nothing")
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("give num_requests or duration_s")
        return self


class Slo(Strict):
    ttft_s: PositiveFloat | None = None
    tpot_s: PositiveFloat | None = None
    e2e_s: PositiveFloat | None = None


class ServeSection(Strict):
    kind: Literal["serve"]
    server: Server
    endpoint: Literal["completions", "chat"] = "completions"
    load: Load
    input_length: Lengths
    output_length: Lengths
    # Ask for exactly output_length tokens (ignore_eos / min_tokens) where the server takes them.
    exact_output: bool = True
    request_timeout_s: PositiveFloat = 120.0
    slo: Slo = Slo()
    seed: int = 0


def load_axis(load: Load) -> list[dict]:
    """The load points of a sweep: one dict per concurrency or request rate."""
    if load.concurrency is not None:
        values = load.concurrency if isinstance(load.concurrency, list) else [load.concurrency]
        return [{"concurrency": c} for c in values]
    values = load.request_rate if isinstance(load.request_rate, list) else [load.request_rate]
    return [{"request_rate": r, "burstiness": load.burstiness, "max_concurrency": load.max_concurrency}
            for r in values]


def length_axis(lengths: Lengths) -> list:
    """Fixed lengths sweep; a drawn distribution is one value of the axis."""
    if isinstance(lengths, list):
        return list(lengths)
    if isinstance(lengths, BaseModel):
        return [lengths.model_dump()]
    return [lengths]


def load_label(load: dict) -> str:
    if "concurrency" in load:
        return f"c{load['concurrency']}"
    rate = load["request_rate"]
    return f"rate {'inf' if math.isinf(rate) else f'{rate:g}'}/s"

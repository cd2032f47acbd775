"""The workload schema of scenario `serve`: an OpenAI-compatible server, running or started by
tpubench, measured under load (docs/scenarios/serve.md).

    scenario:
      kind: serve
      server: {url: http://127.0.0.1:8000, model: my-model, hardware: {accelerator: H100, chips: 8}}
      # or: server: {launch: {preset: vllm, model: Qwen/Qwen3-30B-A3B, args: [--tensor-parallel-size, "8"]}}
      load: {concurrency: [1, 8, 32], num_requests: 200, warmup_requests: 8}
      # or: load: {request_rate: [1, 4, inf], burstiness: 1.0, max_concurrency: 64, duration_s: 60}
      # or: load: {find_capacity: {min_rate: 1, max_rate: 64, goodput: 0.9}}   (capacity at the SLO)
      input_length: 1024               # or {uniform: [512, 2048]} or {csv: lengths.csv}
      output_length: 256
      slo: {ttft_s: 0.5, tpot_s: 0.05}

Any list is a sweep axis: concurrencies or request rates, and fixed input or output lengths.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import (
    AfterValidator,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tpubench.scenarios import FieldProblem
from tpubench.serving.traffic.bounds import (
    MAX_BUILT_TOKENS,
    MAX_CONCURRENCY,
    MAX_POINT_TOKENS,
    MAX_REQUESTS,
    MAX_SECONDS,
    UNKNOWN_CONTEXT,
    Context,
    multi_turn_request_tokens,
    multi_turn_session_tokens,
    sessions_of,
)
from tpubench.workload_spec.sections import Strict

PRESETS = ("transformers", "vllm", "vllm-tpu", "vllm-torchtpu", "vllm-neuron", "sglang", "custom")

# Bounded numbers (serving/traffic/bounds.py says why each bound): no model's context holds more
# tokens than UNKNOWN_CONTEXT, and the workload's own model is checked after the schema.
Tokens = Annotated[int, Field(gt=0, le=UNKNOWN_CONTEXT)]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
Requests = Annotated[int, Field(gt=0, le=MAX_REQUESTS)]
InFlight = Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]
# The one float that may be infinite: a rate of .inf sends every request at once.
Rate = Annotated[float, Field(gt=0, allow_inf_nan=True)]


class UniformLengths(Strict):
    uniform: tuple[Tokens, Tokens]

    @field_validator("uniform")
    @classmethod
    def _ordered(cls, v):
        if v[0] > v[1]:
            raise ValueError(f"the range [{v[0]}, {v[1]}] is empty: give [low, high]")
        return v


class CsvLengths(Strict):
    csv: str   # a file of input_length,output_length rows (relative to the workload file)


# A fixed length may be a mean (505.6) for `tpubench estimate`; a measured point takes whole tokens
# (sweep.py refuses a mean there). Drawn lengths are whole.
MeanLength = Annotated[float, Field(ge=1, le=UNKNOWN_CONTEXT), AfterValidator(lambda v: int(v) if v.is_integer() else v)]
Lengths = Union[MeanLength, list[MeanLength], UniformLengths, CsvLengths]


class Launch(Strict):
    """A server tpubench starts on this machine, waits for, measures and always stops."""

    preset: Literal["transformers", "vllm", "vllm-tpu", "vllm-torchtpu", "vllm-neuron", "sglang", "custom"] = \
        "transformers"
    # What to serve: a local path or a Hub id; "build" makes the workload's model (random weights)
    # and a tokenizer here, with nothing downloaded.
    model: str = "build"
    # The preset's command is used unless given; placeholders {model}, {host}, {port}.
    command: Union[str, list[str], None] = None
    args: list[str] = Field(default_factory=list)       # appended to the preset's command
    host: str = "127.0.0.1"
    port: Annotated[int, Field(gt=0, le=65535)] | None = None   # default: a free port
    ready_path: str = "/v1/models"
    startup_timeout_s: Seconds = 180.0
    env: dict[str, str] = Field(default_factory=dict)
    # The Python that serves ({python} in a command; a preset's console script is the one next to
    # it): a venv of the stack's own. Default: TPUBENCH_VLLM_PYTHON for the vLLM presets, else tpubench's.
    python: str | None = None
    # The server's CPUs ("0-5,8") when it and tpubench's client share this host's CPUs; tpubench keeps
    # the others. Default: vLLM on a CPU is pinned apart (a quarter of the CPUs, at least one, to
    # the client), other stacks are not; "none": never pinned.
    cpus: str | None = None

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
    # Check that the server computes the model (serving/served_model_check.py): greedy logprobs
    # compared with transformers on the same weights, where tpubench has them (built or a local folder).
    check_model: bool = True

    @model_validator(mode="after")
    def _one_source(self):
        if (self.url is None) == (self.launch is None):
            raise ValueError("give either url (a running server) or launch (tpubench starts one)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        return self


class FindCapacity(Strict):
    """Capacity at the SLO: bisect the highest request rate at which at least `goodput` of the
    requests meet every SLO (scenarios/serve/capacity.py), each probe an open-loop point."""

    min_rate: PositiveFloat
    max_rate: PositiveFloat
    goodput: float = Field(0.9, gt=0, le=1)          # share of a probe's requests meeting every SLO
    tolerance: float = Field(0.05, ge=0.01, le=1)    # stop when high / low <= 1 + tolerance
    slo: Slo | None = None                           # default: the section's slo

    @model_validator(mode="after")
    def _bracket(self):
        if not math.isfinite(self.max_rate):
            raise ValueError("max_rate must be a finite request rate")
        if self.min_rate >= self.max_rate:
            raise ValueError(f"min_rate ({self.min_rate:g}) must be below max_rate ({self.max_rate:g})")
        return self


class Load(Strict):
    concurrency: Union[InFlight, list[InFlight], None] = None       # closed loop
    request_rate: Union[Rate, list[Rate], None] = None  # open loop, requests/s (.inf allowed)
    burstiness: PositiveFloat = 1.0          # Gamma shape of the gaps: 1 = Poisson, < 1 burstier
    max_concurrency: InFlight | None = None
    num_requests: Requests | None = 64
    duration_s: Seconds | None = None  # instead of num_requests: send for this long
    warmup_requests: int = Field(2, ge=0, le=MAX_REQUESTS)
    # An open-loop sweep skips the rates above one that over-saturates the server (serving/saturation.py).
    stop_at_saturation: bool = True
    find_capacity: FindCapacity | None = None  # instead of concurrency and request_rate

    @model_validator(mode="after")
    def _one_loop(self):
        # Neither is for a trace replay, which keeps its own clock (checked with the traffic, below).
        if self.concurrency is not None and self.request_rate is not None:
            raise ValueError("give either concurrency (closed loop) or request_rate (open loop)")
        if self.find_capacity is not None and (self.concurrency is not None or self.request_rate is not None):
            raise ValueError("find_capacity chooses the request rates itself: give no concurrency or request_rate")
        if self.concurrency == [] or self.request_rate == []:
            raise ValueError("an empty list sweeps over nothing")
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("give num_requests or duration_s")
        return self


class Slo(Strict):
    ttft_s: Seconds | None = None
    tpot_s: Seconds | None = None
    e2e_s: Seconds | None = None


class DatasetTraffic(Strict):
    """The user's prompts or chats: JSONL rows with `prompt` or `messages`, optionally
    `output_length`/`max_tokens` (serving/traffic/dataset.py)."""

    path: str                                   # relative to the workload file
    order: Literal["sampled", "in_order"] = "sampled"
    output_length: Tokens | None = None    # for rows without one (default: the scenario's)


class SharedPrefixTraffic(Strict):
    """Synthetic prompts sharing prefixes, as vLLM's prefix_repetition dataset."""

    num_prefixes: Requests = 1
    prefix_length: Tokens                       # tokens of each shared prefix
    suffix_length: Tokens                       # tokens of each request's own question
    prefix_share: float = Field(1.0, ge=0, le=1)   # the share of requests that use a shared prefix
    output_length: Tokens | None = None         # default: the scenario's


class MultiTurnTraffic(Strict):
    """Conversations resending their history; the load's concurrency is the sessions in flight."""

    turns: Tokens                               # (each turn adds at least two tokens to the history)
    user_length: Tokens                         # tokens of each user turn
    answer_length: Tokens                       # max_tokens of each answer
    think_time_s: float = Field(0.0, ge=0, le=MAX_SECONDS)   # between an answer and the next turn
    system_prompt_length: int = Field(0, ge=0, le=UNKNOWN_CONTEXT)
    num_system_prompts: Requests = 1            # system prompts shared by the sessions
    sessions: Requests | None = None            # in all (default: ceil(num_requests / turns))


class TraceTraffic(Strict):
    """Timestamped requests replayed on the trace's clock: Mooncake JSONL or Azure CSV."""

    path: str
    format: Literal["mooncake", "azure"] | None = None     # default: from the extension
    time_scale: Union[PositiveFloat, list[PositiveFloat]] = 1.0   # x trace time: 0.5 replays twice as fast
    block_size: Tokens = 512                    # tokens per hash id (Mooncake's)


class Traffic(Strict):
    """The user's own traffic, one mode (docs/scenarios/serve.md, "Traffic")."""

    dataset: DatasetTraffic | None = None
    shared_prefix: SharedPrefixTraffic | None = None
    multi_turn: MultiTurnTraffic | None = None
    trace: TraceTraffic | None = None

    @model_validator(mode="after")
    def _one_mode(self):
        given = [m for m in ("dataset", "shared_prefix", "multi_turn", "trace") if getattr(self, m) is not None]
        if len(given) != 1:
            raise ValueError("give one of dataset, shared_prefix, multi_turn, trace"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self

    def mode(self) -> str:
        return next(m for m in ("dataset", "shared_prefix", "multi_turn", "trace") if getattr(self, m) is not None)


class ServeSection(Strict):
    kind: Literal["serve"]
    server: Server
    endpoint: Literal["completions", "chat"] = "completions"
    load: Load
    # Synthetic prompts of these lengths, unless `traffic` says what to send (then output_length,
    # if given, is the answer length of a mode that has none of its own).
    input_length: Lengths | None = None
    output_length: Lengths | None = None
    traffic: Traffic | None = None
    # Ask for exactly output_length tokens (ignore_eos / min_tokens) where the server takes them.
    exact_output: bool = True
    request_timeout_s: Seconds = 120.0
    slo: Slo = Slo()
    seed: int = Field(0, ge=0)   # numpy's generators take no negative seed
    _workload_dir: str | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _traffic_fits(self):
        mode = self.traffic.mode() if self.traffic else None
        if mode is None and (self.input_length is None or self.output_length is None):
            raise ValueError("give input_length and output_length, or a traffic section")
        if mode is not None and mode != "trace" and self.input_length is not None:
            raise ValueError(f"traffic {mode} makes its own prompts: drop input_length")
        if mode in ("dataset", "shared_prefix", "trace") and isinstance(self.output_length, list):
            raise ValueError("with a traffic section, output_length is one number (the default answer length)")
        if mode == "multi_turn" and isinstance(self.output_length, list):
            # Points differing only in a length no request uses would measure the same thing twice.
            raise ValueError("multi_turn answers with traffic.multi_turn.answer_length tokens: a list of "
                             "output_length sweeps nothing")
        if mode == "trace":
            if self.load.concurrency is not None or self.load.request_rate is not None:
                raise ValueError("a trace is replayed on its own clock: give no load.concurrency or "
                                 "load.request_rate (load.max_concurrency caps it; traffic.trace.time_scale scales it)")
            if self.input_length is not None or self.output_length is not None:
                raise ValueError("a trace gives every request's lengths: drop input_length and output_length")
        elif self.load.concurrency is None and self.load.request_rate is None and self.load.find_capacity is None:
            raise ValueError("give either concurrency (closed loop) or request_rate (open loop)")
        search = self.load.find_capacity
        if search is not None and not any((search.slo or self.slo).model_dump(exclude_none=True).values()):
            raise ValueError("load.find_capacity needs an SLO to meet: give find_capacity.slo or the section's slo")
        if search is not None and mode in ("trace", "multi_turn"):
            raise ValueError(f"load.find_capacity varies the request rate, which traffic {mode} sets itself")
        if mode == "multi_turn":
            if self.load.concurrency is None:
                raise ValueError("multi_turn runs load.concurrency sessions at once: give load.concurrency")
            if self.endpoint != "chat":
                raise ValueError("multi_turn sends chat histories: set endpoint: chat")
        if mode == "shared_prefix" and self.traffic.shared_prefix.output_length is None and self.output_length is None:
            raise ValueError("give traffic.shared_prefix.output_length (or output_length)")
        return self

    @model_validator(mode="after")
    def _workload_folder(self, info: ValidationInfo):
        # Where the traffic's files are read from when the workload is checked (check_traffic_files).
        self._workload_dir = (info.context or {}).get("workload_dir")
        return self

    def check_against_model(self, model_config: dict | None) -> None:
        """A point's size against the workload's model and the bounds of serving/traffic/bounds.py
        (a request within the model's context; requests, tokens, prompt text and time within a
        point's), then the traffic's files, after the schema and the model's config. Out of bounds
        is a FieldProblem naming the field; a bad file row a UserError naming file:line and field."""
        context = Context.of(model_config)
        self._check_sizes(context)
        self.check_traffic_files(context)

    def _check_sizes(self, context: Context) -> None:
        mode = self.traffic.mode() if self.traffic else None
        n = self.load.num_requests if self.load.duration_s is None else None   # None: the duration decides
        out = _largest(self.output_length)
        concurrency = max(_as_list(self.load.concurrency) or [1])
        if mode is None:
            i_len = _largest(self.input_length)
            if i_len is None or out is None:    # lengths from a CSV file: its rows are the user's
                return
            _fits(context, i_len + out, ("scenario", "input_length"),
                  f"{i_len:,} prompt + {out:,} output tokens")
            if n is not None:
                _within(n * (i_len + out), MAX_POINT_TOKENS, ("scenario", "load", "num_requests"),
                        f"{n:,} requests of up to {i_len + out:,} tokens", "tokens sent and asked for")
                _within((n + self.load.warmup_requests) * i_len, MAX_BUILT_TOKENS, ("scenario", "load", "num_requests"),
                        f"{n + self.load.warmup_requests:,} prompts of up to {i_len:,} tokens", "prompt tokens made")
        elif mode == "shared_prefix":
            cfg = self.traffic.shared_prefix
            out = cfg.output_length or out
            here = ("scenario", "traffic", "shared_prefix")
            per = cfg.prefix_length + cfg.suffix_length
            _fits(context, per + out, (*here, "prefix_length"),
                  f"{cfg.prefix_length:,} prefix + {cfg.suffix_length:,} suffix + {out:,} output tokens")
            if n is not None:
                _within(n * (per + out), MAX_POINT_TOKENS, ("scenario", "load", "num_requests"),
                        f"{n:,} requests of {per + out:,} tokens", "tokens sent and asked for")
            built = cfg.num_prefixes * cfg.prefix_length + ((n or 0) + self.load.warmup_requests) * per
            _within(built, MAX_BUILT_TOKENS, (*here, "num_prefixes"),
                    f"{cfg.num_prefixes:,} prefixes and {(n or 0) + self.load.warmup_requests:,} prompts",
                    "prompt tokens made")
        elif mode == "multi_turn":
            cfg = self.traffic.multi_turn
            here = ("scenario", "traffic", "multi_turn")
            shape = (cfg.turns, cfg.user_length, cfg.answer_length, cfg.system_prompt_length)
            _fits(context, multi_turn_request_tokens(*shape), (*here, "turns"),
                  f"the last of {cfg.turns:,} turns resends the whole history: "
                  f"{multi_turn_request_tokens(*shape):,} tokens")
            sessions = sessions_of(cfg.sessions, n, cfg.turns, concurrency)
            loc = (*here, "sessions") if cfg.sessions else ("scenario", "load", "num_requests")
            _within(sessions * cfg.turns, MAX_REQUESTS, loc, f"{sessions:,} sessions of {cfg.turns:,} turns",
                    "requests")
            _within(sessions * multi_turn_session_tokens(*shape), MAX_POINT_TOKENS, loc,
                    f"{sessions:,} sessions resending their histories", "tokens sent and asked for")
            _within(sessions * cfg.turns * cfg.user_length + cfg.num_system_prompts * cfg.system_prompt_length,
                    MAX_BUILT_TOKENS, loc, f"{sessions:,} sessions' user turns and the system prompts",
                    "prompt tokens made")
            _within(cfg.turns * cfg.think_time_s, MAX_SECONDS, (*here, "think_time_s"),
                    f"{cfg.turns:,} turns x {cfg.think_time_s:g} s of think time", "seconds a session lasts")
        elif mode == "dataset" and n is not None:
            out = self.traffic.dataset.output_length or out
            if out is not None:
                _within(n * out, MAX_POINT_TOKENS, ("scenario", "load", "num_requests"),
                        f"{n:,} requests of {out:,} output tokens", "tokens asked for")

    def check_traffic_files(self, context: Context | None = None) -> None:
        """The dataset or trace a traffic section names, read whole (streamed) when the workload is
        loaded, after the schema and the model's config: a bad row (or, with `context`, one that
        does not fit in it) is a UserError naming its file:line and field; a replay too large for
        a point, a FieldProblem. Only when the workload's folder is known (the loader gives it)."""
        if self.traffic is None or self._workload_dir is None:
            return
        from tpubench.serving.traffic.plan import check_traffic

        # A replay sends the whole trace unless load.num_requests is set (sweep.points).
        limit = self.load.num_requests if "num_requests" in self.load.model_fields_set else None
        info = check_traffic(self.traffic.model_dump(exclude_none=True), self._workload_dir,
                             self.output_length if isinstance(self.output_length, int) else None,
                             chat=self.endpoint == "chat", context=context, limit=limit)
        if self.traffic.trace is not None and "rows_sent" in info:
            here = ("scenario", "traffic", "trace", "path")
            what = f"a replay of {info['rows_sent']:,} rows"
            hint = ": set load.num_requests to replay the first rows"
            _within(info["rows_sent"], MAX_REQUESTS, here, what, "requests", hint)
            _within(info["tokens_sent"], MAX_POINT_TOKENS, here, what, "tokens sent and asked for", hint)
            slowest = max(_as_list(self.traffic.trace.time_scale))
            _within(info["span_sent_s"] * slowest, MAX_SECONDS, ("scenario", "traffic", "trace", "time_scale"),
                    f"{what} spanning {info['span_sent_s']:.6g} s x time_scale {slowest:g}", "seconds")


def _as_list(value) -> list:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def _largest(lengths) -> int | None:
    """The largest length a Lengths value asks for; None for a CSV of lengths (or none given)."""
    if isinstance(lengths, UniformLengths):
        return lengths.uniform[1]
    values = _as_list(lengths)
    return max(values) if values and all(isinstance(v, (int, float)) for v in values) else None


def _fits(context: Context, tokens: int, loc: tuple, what: str) -> None:
    if tokens > context.tokens:
        raise FieldProblem(loc, f"{what} exceed {context.words()}")


def _within(value: float, bound: float, loc: tuple, what: str, unit: str, hint: str = "") -> None:
    if value > bound:
        raise FieldProblem(loc, f"{what}: {value:,.0f} {unit}, more than a point's {bound:,.0f} "
                                f"(docs/scenarios/serve.md, Bounds){hint}")

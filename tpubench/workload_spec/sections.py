"""The workload sections every scenario shares: the model, its scales, how it executes, how it is
measured, and its parallel layout; with the small helpers the scenarios' own sections use.

A scenario's own section (`scenario:` in the file) lives in its package (tpubench/scenarios/<kind>/schema.py);
the whole workload is assembled over the scenario registry in tpubench/run/workload.py.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PositiveInt,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

# The workload's names, re-exported: the schema modules (and code that builds or runs a workload)
# take them from here; code that only describes points and results takes them from vocabulary.py.
from tpubench.workload_spec.precision import canonical_quantization
from tpubench.workload_spec.vocabulary import (  # noqa: F401
    FULL_SCALE,
    HF_GENERATE,
    JAX_EXPERTS,
    TORCH_EXPERTS,
    DecodeLoop,
    Dtype,
    ExecutionMode,
    ExpertsImpl,
    MatmulPrecision,
    as_list,
    axis,
)

# A quantisation as written (workload_spec/precision.py: 'fp8', 'kv_fp8', 'fp8+kv_fp8'), kept in its
# one canonical spelling so that results, keys and labels agree however the file wrote it.
Quantization = Annotated[str, AfterValidator(canonical_quantization)]

# Names travel into file names, CSV cells and HTML: letters, digits, '.', '_' and '-' only.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def safe_name(value: str) -> str:
    if not _SAFE_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a safe name: use 1-64 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return value


class Strict(BaseModel):
    # No float field takes inf or NaN unless it says so (Field(allow_inf_nan=True)): an infinite
    # timeout or think time passes any bound and then hangs the run.
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True, allow_inf_nan=False)


# Any time a workload gives (a timeout, a duration, a measurement's limit): 30 days. Longer is a
# unit slip, and a run that long is not a benchmark.
MAX_SECONDS = 30 * 86_400.0
# Iterations, warm-up steps, and chips one point's model is sharded over: far beyond any real run.
MAX_ITERATIONS = 1_000_000
MAX_CHIPS = 1 << 16
# Tokens in one sequence: the largest context a model config may declare (models/config_check.py).
MAX_SEQUENCE_TOKENS = 1 << 24
# Sequences (or images) in one batch, and tokens one batch holds (sequences x their tokens: the ids
# alone are 2 GiB at the bound) in generate and train (docs/workloads.md#limits).
MAX_BATCH = 1 << 16
MAX_BATCH_TOKENS = 1 << 28

# Numbers beyond a signed 64-bit integer: no count, size, seed, id, rate or time a workload holds
# is one (a float that large is a unit slip), and numpy, torch and JSON readers overflow on them.
INT_LIMIT = (1 << 63) - 1


def bad_number(data: Any, loc: tuple = ()) -> tuple[tuple, str] | None:
    """(path, why) of the first number anywhere in a workload's data that no field can take: NaN,
    a finite number beyond INT_LIMIT either way, or an infinity inside a mapping the schema does
    not type (model.config, a scale's config, compile_options), where nothing else would refuse
    it. The typed fields refuse infinities themselves (Strict), all but the one that means
    something (an infinite request rate)."""
    if isinstance(data, float):
        if data != data:
            return loc, "not a number (NaN)"
        if data in (float("inf"), float("-inf")):
            return (loc, f"must be a finite number (got {data})") if _untyped(loc) else None
        if abs(data) > INT_LIMIT:
            return loc, f"{data:g} is beyond any value a workload holds (at most {float(INT_LIMIT):.3g} either way)"
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > INT_LIMIT:
        return loc, f"an integer of {len(str(data)) if data.bit_length() < 14000 else 'thousands of'} digits: " \
                    f"at most {INT_LIMIT:,}"
    elif isinstance(data, dict):
        for key, value in data.items():
            found = bad_number(value, (*loc, key))
            if found:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = bad_number(value, (*loc, i))
            if found:
                return found
    return None


def _untyped(loc: tuple) -> bool:
    return (loc[:2] == ("model", "config") or (loc[:1] == ("scales",) and loc[2:3] == ("config",))
            or loc[:2] == ("execution", "compile_options"))


class _Zipf(Strict):
    zipf: float = Field(gt=0, le=10, description="Zipf exponent s: expert e takes weight 1/(e+1)^s")


class _HotSet(Strict):
    experts: PositiveInt = Field(description="hot experts: experts 0..n-1")
    share: float = Field(gt=0, le=1, description="share of all (token, expert) assignments on the hot set")


class Skewed(Strict):
    skewed: _Zipf

    def point_value(self) -> dict:
        return {"skewed": self.skewed.model_dump()}


class Hot(Strict):
    hot: _HotSet

    def point_value(self) -> dict:
        return {"hot": self.hot.model_dump()}


class Trace(Strict):
    """Per-layer expert histograms from a JSON file ({"layers": [[...], ...]}), relative to the
    workload file; read and checked on load, and carried in the run point."""

    trace: str
    _layers: list = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _read(self, info: ValidationInfo):
        from pathlib import Path

        from tpubench.workload_spec.routing_trace import read_trace

        path = Path(self.trace)
        if not path.is_absolute():
            path = Path((info.context or {}).get("workload_dir", ".")) / path
        self._layers = read_trace(path)
        return self

    def point_value(self) -> dict:
        return {"trace": {"file": self.trace, "layers": self._layers}}


def _routing_tag(value) -> str | None:
    """Which kind a routing value is ('natural', 'skewed', ...): errors then name only that kind."""
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value))
    return {Skewed: "skewed", Hot: "hot", Trace: "trace"}.get(type(value))   # an already-built value


# model.routing (docs/workloads.md#routing; models/routing.py has the schedules).
Routing = Annotated[Union[Annotated[Literal["natural", "uniform"], Tag("name")], Annotated[Skewed, Tag("skewed")],
                          Annotated[Hot, Tag("hot")], Annotated[Trace, Tag("trace")]],
                    Discriminator(_routing_tag, custom_error_type="routing",
                                  custom_error_message="expected natural, uniform or one of {skewed: {zipf: S}}, "
                                                       "{hot: {experts: N, share: P}}, {trace: FILE}")]


class QualityGate(Strict):
    """The tolerance of a quantised point against its unquantised reference: the mean KL divergence
    of next-token distributions (nats, reference || quantised) over the teacher-forced steps, and
    the share of those steps whose greedy token agrees. KL is the gate's main figure: agreement
    also counts near-ties that any rounding flips (a random-weight model's top logits lie close
    together: int8 weights move its argmax at about 1 step in 8 while its KL stays near 1e-4 nats),
    so its default is lenient."""

    max_mean_kl: float = Field(0.01, ge=0)
    min_token_agreement: float = Field(0.8, ge=0, le=1)
    # Greedy steps of the reference after the prompt that the check scores.
    steps: int = Field(32, gt=0, le=1024)


class ModelSpec(Strict):
    family: str = Field(description="transformers model_type, e.g. qwen3_moe, qwen3, gemma4_text")
    hub_id: str | None = None
    dtype: Union[Dtype, list[Dtype]] = "bfloat16"
    weights: Literal["random", "pretrained"] = "random"
    experts_implementation: Union[ExpertsImpl, list[ExpertsImpl], None] = None
    trust_remote_code: bool = False
    config: dict[str, Any] = Field(default_factory=dict)
    # How tokens are routed to experts (a sweep axis): natural, uniform, skewed, hot or trace.
    routing: Union[Routing, list[Routing]] = "natural"
    # Weight (and activation) and KV-cache quantisation, a sweep axis like dtype (workload_spec/precision.py).
    quantization: Union[Quantization, list[Quantization]] = "none"
    # How far a quantised point may stray from the unquantised model on the same weights and
    # prompt before it is invalid (docs/precision.md).
    quality: QualityGate = Field(default_factory=QualityGate)

    _non_empty = field_validator("dtype", "experts_implementation", "routing", "quantization")(
        classmethod(lambda cls, v: axis(v)))

    def routing_axis(self) -> list:
        """The routing axis as run points store it: 'natural', 'uniform' or a one-key dict."""
        return [v.point_value() if hasattr(v, "point_value") else v for v in as_list(self.routing)]




SequenceTokens = Annotated[int, Field(gt=0, le=MAX_SEQUENCE_TOKENS)]


def _whole_as_int(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


# A length that may be a mean (a published 505.6 tokens): `tpubench estimate` reads it as written; a
# measured batch, whose lengths are a shape, takes only whole ones (its scenario's sweep says so).
MeanTokens = Annotated[float, Field(ge=1, le=MAX_SEQUENCE_TOKENS), AfterValidator(_whole_as_int)]
BatchSize = Annotated[int, Field(gt=0, le=MAX_BATCH)]


class ScenarioOverride(Strict):
    batch_size: Union[BatchSize, list[BatchSize], None] = None
    input_length: Union[SequenceTokens, list[SequenceTokens], None] = None
    output_length: Union[SequenceTokens, list[SequenceTokens], None] = None
    sequence_length: Union[SequenceTokens, list[SequenceTokens], None] = None


class ScaleSpec(Strict):
    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    dtype: Union[Dtype, list[Dtype], None] = None
    scenario: ScenarioOverride | None = None

    def overrides(self) -> ScenarioOverride:
        """What the scale sets of the scenario's axes (none by default)."""
        return self.scenario or ScenarioOverride()


class Execution(Strict):
    mode: Union[ExecutionMode, list[ExecutionMode]] = "eager"
    # Passed to torch.compile (mode, fullgraph, dynamic, options) or ignored by jax.jit.
    compile_options: dict[str, Any] = Field(default_factory=dict)
    # How float32 matmuls compute inside (torch.set_float32_matmul_precision's names; JAX gets the
    # same level): set on both sides, since JAX defaults to bf16 on TPU and TF32 on GPU, torch to fp32.
    matmul_precision: Union[MatmulPrecision, list[MatmulPrecision]] = "highest"

    _non_empty = field_validator("matmul_precision")(classmethod(lambda cls, v: axis(v)))


class Measurement(Strict):
    warmup: int = Field(2, ge=0, le=MAX_ITERATIONS)
    min_iterations: int = Field(5, gt=0, le=MAX_ITERATIONS)
    min_seconds: float = Field(1.0, ge=0, le=MAX_SECONDS)
    max_seconds: float = Field(300.0, gt=0, le=MAX_SECONDS)
    # Keep sampling past min_iterations and min_seconds until the headline's 95% CI half-width is
    # within this share of its mean, or max_seconds runs out (null: stop at the minimums).
    target_ci: float | None = Field(0.05, gt=0, lt=1)
    max_cv: float = Field(0.10, gt=0)
    seed: int = Field(0, ge=0)   # numpy's generators take no negative seed

    @field_validator("max_seconds")
    @classmethod
    def _after_min(cls, v, info):
        if v < info.data.get("min_seconds", 0):
            raise ValueError(f"max_seconds ({v:g}) is below min_seconds ({info.data['min_seconds']:g})")
        return v


Chips = Annotated[int, Field(gt=0, le=MAX_CHIPS)]


class Parallel(Strict):
    """How many chips one point's model is sharded over (docs/multi-chip.md); chips = world size."""

    tensor: Union[Chips, list[Chips]] = 1   # transformers tp_plan="auto"
    expert: Union[Chips, list[Chips]] = 1   # experts split over ranks, attention tensor-parallel
    data: Union[Chips, list[Chips]] = 1     # training: data-parallel ranks (DDP, or FSDP2)
    fsdp: bool = False                                  # training: shard parameters (fully_shard) over them
    # A collective that waits longer than this fails the point: a dead or hung rank never hangs a sweep.
    collective_timeout_s: float = Field(300.0, gt=0, le=MAX_SECONDS)

    _non_empty = field_validator("tensor", "expert", "data")(classmethod(lambda cls, v: axis(v)))

    @field_validator("expert")
    @classmethod
    def _one_kind(cls, v, info):
        if max(as_list(v)) > 1 and max(as_list(info.data.get("tensor", 1))) > 1:
            raise ValueError("tensor and expert parallel cannot be combined in one workload yet: "
                             "sweep them in two workloads")
        return v

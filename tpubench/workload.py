"""Workload files: the pydantic schema, YAML loading with file:line errors, and sweep expansion.

A workload names a model architecture (written out in full in the file, so no Hub access is
needed), named smaller scales of the same architecture, a scenario and how to measure it. Any
field typed `Axis[...]` may be a list: the cartesian product of all such lists is the sweep.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator, model_validator

from tpubench.errors import UserError
from tpubench.workload_serve import ServeScenario, length_axis, load_axis, load_label

Dtype = Literal["float32", "bfloat16", "float16"]
ExpertsImpl = Literal["eager", "grouped_mm", "batched_mm"]
ExecutionMode = Literal["eager", "compile"]
MatmulPrecision = Literal["highest", "high", "medium"]
FULL_SCALE = "full"
# Sweeps above this many points are refused before any per-point work (`--max-points` raises it).
MAX_POINTS = 10_000
# Names travel into file names, CSV cells and HTML: letters, digits, '.', '_' and '-' only.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _safe_name(value: str) -> str:
    if not _SAFE_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a safe name: use 1-64 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


def _axis(value):
    """A sweep axis may be a scalar or a non-empty list."""
    if isinstance(value, list) and not value:
        raise ValueError("an empty list sweeps over nothing")
    return value


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class ModelSpec(_Strict):
    family: str = Field(description="transformers model_type, e.g. qwen3_moe, qwen3, gemma4_text")
    hub_id: str | None = None
    dtype: Union[Dtype, list[Dtype]] = "bfloat16"
    weights: Literal["random", "pretrained"] = "random"
    experts_implementation: Union[ExpertsImpl, list[ExpertsImpl], None] = None
    trust_remote_code: bool = False
    config: dict[str, Any] = Field(default_factory=dict)

    _non_empty = field_validator("dtype", "experts_implementation")(classmethod(lambda cls, v: _axis(v)))


class GenerateScenario(_Strict):
    kind: Literal["generate"] = "generate"
    batch_size: Union[PositiveInt, list[PositiveInt]]
    input_length: Union[PositiveInt, list[PositiveInt]]
    output_length: Union[PositiveInt, list[PositiveInt]]

    _non_empty = field_validator("batch_size", "input_length", "output_length")(classmethod(lambda cls, v: _axis(v)))


class Optimizer(_Strict):
    name: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(1e-4, gt=0)
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = Field(0.1, ge=0)
    eps: float = Field(1e-8, gt=0)


class TrainScenario(_Strict):
    """Training steps (forward, backward, optimizer step) on seeded random token batches."""

    kind: Literal["train"]
    batch_size: Union[PositiveInt, list[PositiveInt]]        # sequences per data-parallel rank per micro-step
    sequence_length: Union[PositiveInt, list[PositiveInt]]
    gradient_accumulation: PositiveInt = 1                   # micro-steps per optimizer step
    optimizer: Optimizer = Optimizer()
    activation_checkpointing: bool = False
    # bf16_autocast: float32 master weights, bfloat16 compute; bf16: pure bfloat16; fp32: float32.
    precision: Literal["bf16_autocast", "bf16", "fp32"] = "bf16_autocast"

    _non_empty = field_validator("batch_size", "sequence_length")(classmethod(lambda cls, v: _axis(v)))


class ScenarioOverride(_Strict):
    batch_size: Union[PositiveInt, list[PositiveInt], None] = None
    input_length: Union[PositiveInt, list[PositiveInt], None] = None
    output_length: Union[PositiveInt, list[PositiveInt], None] = None
    sequence_length: Union[PositiveInt, list[PositiveInt], None] = None


class ScaleSpec(_Strict):
    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    dtype: Union[Dtype, list[Dtype], None] = None
    scenario: ScenarioOverride | None = None


class Execution(_Strict):
    mode: Union[ExecutionMode, list[ExecutionMode]] = "eager"
    # Passed to torch.compile (mode, fullgraph, dynamic, options) or ignored by jax.jit.
    compile_options: dict[str, Any] = Field(default_factory=dict)
    # How float32 matmuls compute inside (torch.set_float32_matmul_precision's names; JAX gets the
    # same level): set on both sides, since JAX defaults to bf16 on TPU and TF32 on GPU, torch to fp32.
    matmul_precision: Union[MatmulPrecision, list[MatmulPrecision]] = "highest"

    _non_empty = field_validator("matmul_precision")(classmethod(lambda cls, v: _axis(v)))


class Measurement(_Strict):
    warmup: int = Field(2, ge=0)
    min_iterations: PositiveInt = 5
    min_seconds: float = Field(1.0, ge=0)
    max_seconds: float = Field(300.0, gt=0)
    target_ci: float | None = Field(None, gt=0, lt=1)
    max_cv: float = Field(0.10, gt=0)
    seed: int = 0

    @field_validator("max_seconds")
    @classmethod
    def _after_min(cls, v, info):
        if v < info.data.get("min_seconds", 0):
            raise ValueError(f"max_seconds ({v:g}) is below min_seconds ({info.data['min_seconds']:g})")
        return v


class Parallel(_Strict):
    """How many chips one point's model is sharded over (docs/multi-chip.md); chips = world size."""

    tensor: Union[PositiveInt, list[PositiveInt]] = 1   # transformers tp_plan="auto"
    expert: Union[PositiveInt, list[PositiveInt]] = 1   # experts split over ranks, attention tensor-parallel
    data: Union[PositiveInt, list[PositiveInt]] = 1     # training: data-parallel ranks (DDP, or FSDP2)
    fsdp: bool = False                                  # training: shard parameters (fully_shard) over them
    # A collective that waits longer than this fails the point: a dead or hung rank never hangs a sweep.
    collective_timeout_s: float = Field(300.0, gt=0)

    _non_empty = field_validator("tensor", "expert", "data")(classmethod(lambda cls, v: _axis(v)))

    @field_validator("expert")
    @classmethod
    def _one_kind(cls, v, info):
        if max(_as_list(v)) > 1 and max(_as_list(info.data.get("tensor", 1))) > 1:
            raise ValueError("tensor and expert parallel cannot be combined in one workload yet: "
                             "sweep them in two workloads")
        return v


class Workload(_Strict):
    name: str
    description: str = ""
    model: ModelSpec | None = None     # required to generate; for serve, what the server runs (optional)
    scales: dict[str, ScaleSpec] = Field(default_factory=dict)
    scenario: Union[GenerateScenario, ServeScenario, TrainScenario] = Field(discriminator="kind")
    execution: Execution = Execution()
    measurement: Measurement = Measurement()
    parallel: Parallel = Parallel()

    _name_is_safe = field_validator("name")(classmethod(lambda cls, v: _safe_name(v)))

    @model_validator(mode="before")
    @classmethod
    def _generate_by_default(cls, data):
        """A scenario without a kind generates (as every workload did before serve existed)."""
        if isinstance(data, dict) and isinstance(data.get("scenario"), dict) and "kind" not in data["scenario"]:
            data = {**data, "scenario": {"kind": "generate", **data["scenario"]}}
        return data

    @model_validator(mode="after")
    def _model_to_generate(self):
        if self.scenario.kind != "serve" and self.model is None:
            raise ValueError(f"model is required: scenario {self.scenario.kind} builds it")
        layout = self.parallel
        if self.scenario.kind == "train" and max(_as_list(layout.tensor) + _as_list(layout.expert)) > 1:
            raise ValueError("training runs data-parallel (parallel.data, parallel.fsdp); tensor and expert "
                             "parallel are for generate")
        if self.scenario.kind != "train" and (max(_as_list(layout.data)) > 1 or layout.fsdp):
            raise ValueError("parallel.data and parallel.fsdp are for scenario train")
        return self

    @field_validator("scales")
    @classmethod
    def _no_full(cls, v):
        if FULL_SCALE in v:
            raise ValueError(f"'{FULL_SCALE}' is the architecture under model.config; name scales otherwise")
        for name in v:
            _safe_name(name)
        return v


@dataclass(frozen=True)
class RunPoint:
    """One fully resolved point of a sweep: every value scalar, every default filled in."""

    workload: str
    scale: str
    family: str
    hub_id: str | None
    weights: str
    trust_remote_code: bool
    dtype: str
    experts_implementation: str | None
    model_config: dict = field(hash=False)
    batch_size: int = 1
    input_length: int = 1
    output_length: int = 1
    execution_mode: str = "eager"
    tensor_parallel: int = 1
    expert_parallel: int = 1
    scenario_kind: str = "generate"
    data_parallel: int = 1
    # execution.matmul_precision (None: the point's framework is not tpubench's, e.g. a server's).
    matmul_precision: str | None = None
    # Scenario-specific resolved values (serve: the load point, lengths, server, SLOs).
    params: dict = field(default_factory=dict, hash=False)
    compile_options: dict = field(default_factory=dict, hash=False)
    measurement: dict = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunPoint":
        return cls(**data)

    def key(self) -> str:
        """A stable hash of everything that defines what is measured (for --resume). A single-chip
        layout is left out of it, so points measured before `parallel` existed keep their key; so is
        matmul precision 'highest' (torch's own default before the field existed)."""
        data = self.to_dict()
        for name, default in (("tensor_parallel", 1), ("expert_parallel", 1), ("scenario_kind", "generate"),
                              ("params", {}), ("data_parallel", 1)):
            if data[name] == default:
                del data[name]
        if data.get("matmul_precision") in (None, "highest"):
            data.pop("matmul_precision", None)
        blob = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def model_identity(self) -> tuple:
        """What makes two points' models the same (one build serves both)."""
        return (self.family, self.hub_id, self.weights, self.dtype, self.experts_implementation,
                repr(sorted(self.model_config.items())), self.measurement.get("seed"))

    @property
    def world_size(self) -> int:
        """Processes (one per chip) the point runs on."""
        return self.tensor_parallel * self.expert_parallel * self.data_parallel

    def label(self) -> str:
        if self.scenario_kind == "serve":
            lengths = [f"{name}{v if v is not None else '~'}" for name, v in
                       (("in", self.input_length), ("out", self.output_length))]
            return " ".join([load_label(self.params["load"]), *lengths, f"{self.params['endpoint']}"])
        parts = [f"b{self.batch_size}", f"in{self.input_length}", f"out{self.output_length}",
                 self.dtype, self.execution_mode]
        if self.experts_implementation:
            parts.append(f"experts={self.experts_implementation}")
        if self.tensor_parallel > 1:
            parts.append(f"tp{self.tensor_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"ep{self.expert_parallel}")
        if self.scenario_kind == "train":
            parts = [f"b{self.batch_size}", f"seq{self.input_length}", self.params.get("precision", ""),
                     self.execution_mode]
            if self.params.get("gradient_accumulation", 1) > 1:
                parts.append(f"accum{self.params['gradient_accumulation']}")
            if self.data_parallel > 1:
                parts.append(f"{'fsdp' if self.params.get('fsdp') else 'dp'}{self.data_parallel}")
        if self.matmul_precision not in (None, "highest"):
            parts.append(f"matmul={self.matmul_precision}")
        return " ".join(parts)


# ----------------------------------------------------------------------------- loading


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file; every problem is a UserError naming file:line and field."""
    path = Path(path)
    if not path.is_file():
        raise UserError("no such workload file", where=str(path))
    text = path.read_text(encoding="utf-8")
    try:
        data, root = _parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"YAML syntax error: {problem}", where=where) from None
    if data is None:
        raise UserError("the file is empty; expected a mapping with name, model and scenario", where=str(path))
    if not isinstance(data, dict):
        raise UserError(f"expected a mapping at the top level, found {type(data).__name__}", where=str(path))
    try:
        workload = Workload.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        # The scenario's kind (pydantic's union tag) is in loc but not in the file.
        shown = tuple(p for i, p in enumerate(loc) if not (i == 1 and loc[0] == "scenario" and p in _SCENARIOS))
        raise _user_error(path, root, shown, _explain(err, loc)) from None
    _check_model(workload, path, root)
    return workload


# libyaml's parser where PyYAML has it (several times faster), with the same safe constructor.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(text: str) -> tuple[Any, Any]:
    """The file's data and its node tree (whose marks give line numbers), from one parse: the same
    as yaml.safe_load (safe constructor only) plus yaml.compose."""
    loader = _SafeLoader(text)
    try:
        root = loader.get_single_node()
        return (loader.construct_document(root) if root is not None else None), root
    finally:
        loader.dispose()


def _user_error(path: Path, root, loc: tuple, message: str) -> UserError:
    line = _line_of(root, loc)
    where = f"{path}:{line}" if line else str(path)
    return UserError(message, where=where, field=_dotted(loc) or None)


def _check_model(workload: Workload, path: Path, root) -> None:
    """The family and every scale's resolved config values, against the table of transformers'
    config classes (no transformers import: see models/config_check.py)."""
    from tpubench.models.config_check import ConfigProblem, check_model_config, family_problem

    if workload.model is None:
        _check_served_model_named(workload, path, root)
        return
    problem = family_problem(workload.model.family)
    if problem:
        raise _user_error(path, root, ("model", "family"), problem)
    for scale in scale_names(workload):
        own = workload.scales[scale].config if scale != FULL_SCALE else {}
        try:
            check_model_config(workload.model.family, {**workload.model.config, **own},
                               tensor=_as_list(workload.parallel.tensor), expert=_as_list(workload.parallel.expert))
        except ConfigProblem as exc:
            if exc.path[0] == "parallel":
                raise _user_error(path, root, exc.path, f"{exc.message} (scale '{scale}')") from None
            prefix = ("scales", scale, "config") if exc.path[0] in own else ("model", "config")
            raise _user_error(path, root, prefix + exc.path, exc.message) from None
        if workload.scenario.kind == "train":
            _check_sequence_fits(workload, scale, {**workload.model.config, **own}, path, root)


def _check_served_model_named(workload: Workload, path: Path, root) -> None:
    """A launched server told to serve model 'build' serves the workload's model: without a model
    block there is nothing to build, and that is known before any server starts."""
    launch = workload.scenario.server.launch if workload.scenario.kind == "serve" else None
    if launch is not None and launch.model == "build":
        raise _user_error(path, root, ("scenario", "server", "launch", "model"),
                          "'build' serves the workload's model, but the workload has no model block: "
                          "add one, or name the model to serve (a Hub id or a local path)")


def _check_sequence_fits(workload: Workload, scale: str, config: dict, path: Path, root) -> None:
    """A training sequence longer than the model's positions is refused before anything is built."""
    positions = config.get("max_position_embeddings")
    override = workload.scales[scale].scenario if scale != FULL_SCALE else None
    lengths = _as_list((override and override.sequence_length) or workload.scenario.sequence_length)
    if positions and max(lengths) > positions:
        loc = ("scales", scale, "scenario", "sequence_length") if override and override.sequence_length \
            else ("scenario", "sequence_length")
        raise _user_error(path, root, loc, f"{max(lengths)} tokens exceed the model's max_position_embeddings "
                                           f"({positions}, scale '{scale}')")


def with_server_url(workload: Workload, url: str | None) -> Workload:
    """A serve workload pointed at a running server (`run --server-url`), its launch block dropped."""
    from tpubench.workload_serve import Server

    if url is None:
        return workload
    if workload.scenario.kind != "serve":
        raise UserError("--server-url needs a serve workload (scenario kind: serve)", field="--server-url")
    old = workload.scenario.server
    try:
        server = Server(url=url, model=old.model, hardware=old.hardware, tokenizer=old.tokenizer)
    except ValidationError as exc:
        raise UserError(exc.errors()[0]["msg"].removeprefix("Value error, "), field="--server-url") from None
    return workload.model_copy(update={"scenario": workload.scenario.model_copy(update={"server": server})})


def with_layout(workload: Workload, tensor: int | None = None, expert: int | None = None,
                data: int | None = None, fsdp: bool | None = None) -> Workload:
    """The workload with its parallel layout replaced (`run --tensor-parallel/--expert-parallel`,
    and for training `--data-parallel/--fsdp`)."""
    from tpubench.models.config_check import ConfigProblem, check_model_config

    if data is not None or fsdp is not None:
        if workload.scenario.kind != "train":
            raise UserError("--data-parallel and --fsdp are for training workloads (scenario kind: train)",
                            field="--data-parallel" if data is not None else "--fsdp")
        update = {k: v for k, v in (("data", data), ("fsdp", fsdp)) if v is not None}
        workload = workload.model_copy(update={"parallel": workload.parallel.model_copy(update=update)})
    if tensor is None and expert is None:
        return workload
    if workload.scenario.kind != "generate":
        raise UserError("a served model is sharded by its server: set its own flags in the launch args",
                        field="--tensor-parallel" if tensor else "--expert-parallel")
    if (tensor or 1) > 1 and (expert or 1) > 1:
        raise UserError("tensor and expert parallel cannot be combined in one run yet", field="--expert-parallel")
    layout = {**workload.parallel.model_dump(), "tensor": tensor or 1, "expert": expert or 1}
    for scale in scale_names(workload):
        own = workload.scales[scale].config if scale != FULL_SCALE else {}
        try:
            check_model_config(workload.model.family, {**workload.model.config, **own},
                               tensor=(layout["tensor"],), expert=(layout["expert"],))
        except ConfigProblem as exc:
            flag = "--tensor-parallel" if exc.path[-1] == "tensor" else "--expert-parallel"
            raise UserError(f"{exc.message} (scale '{scale}')", field=flag) from None
    return workload.model_copy(update={"parallel": Parallel(**layout)})


def _dotted(loc: tuple) -> str:
    # pydantic puts union member names ("list[...]", "int") into loc; they mean nothing to a user.
    keep = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p in _TYPE_NAMES))]
    return ".".join(keep)


_TYPE_NAMES = {"int", "str", "float", "bool", "literal", "none", "dict", "list", "function-after", "constrained-int"}


def _explain(err: dict, loc: tuple) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(loc[:-1])
        guess = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean '{guess[0]}'?" if guess else f"; allowed: {', '.join(sorted(allowed))}"
        return f"unknown key '{key}'{hint}"
    if kind == "missing":
        return "required field is missing"
    msg = err["msg"].removeprefix("Value error, ")
    if "input" in err and kind not in ("missing",):
        msg = f"{msg} (got {err['input']!r})"
    return msg


def _allowed_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] | None = Workload
    for i, part in enumerate(loc):
        if model is None:
            return []
        if i == 1 and loc[0] == "scenario" and part in _SCENARIOS:
            model = _SCENARIOS[part]
        elif part in model.model_fields:
            ann = model.model_fields[part].annotation
            model = _model_in(ann)
        elif model is Workload and loc and loc[0] == "scales":
            model = ScaleSpec
        else:
            model = _model_in(None)
    return list(model.model_fields) if model else []


def _scenario_schemas() -> dict[str, type[BaseModel]]:
    """Each scenario kind's schema section, read from Workload's `scenario` union: the union is the
    only list of kinds here (tests check it against the scenarios registry), so a kind added there
    is known to error messages too."""
    union = Workload.model_fields["scenario"].annotation
    return {schema.model_fields["kind"].annotation.__args__[0]: schema for schema in union.__args__}


_SCENARIOS = _scenario_schemas()


def _model_in(ann) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _model_in(arg)
        if found:
            return found
    return None


def _line_of(node, loc: tuple) -> int | None:
    """The 1-based line of the deepest YAML node that `loc` reaches."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    line = key_node.start_mark.line + 1
                    nxt = value_node
                    break
            if nxt is None:
                return line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


# ----------------------------------------------------------------------------- sweeps


def scale_names(workload: Workload) -> list[str]:
    return [FULL_SCALE, *workload.scales]


def sweep_axes(workload: Workload, scale: str = FULL_SCALE, *, source: str = "") -> dict[str, list]:
    """Every sweep axis of one scale with its values (a scalar is an axis of one value)."""
    if scale != FULL_SCALE and scale not in workload.scales:
        known = ", ".join(scale_names(workload))
        raise UserError(f"unknown scale '{scale}' (this workload has: {known})", where=source or None, field="scales")
    spec = workload.scales.get(scale, ScaleSpec())
    scen = workload.scenario
    if scen.kind == "serve":
        return {"load": load_axis(scen.load), "input_length": length_axis(scen.input_length),
                "output_length": length_axis(scen.output_length)}
    if scen.kind == "train":
        over = spec.scenario or ScenarioOverride()
        return {"batch_size": _as_list(over.batch_size or scen.batch_size),
                "input_length": _as_list(over.sequence_length or scen.sequence_length),
                "execution_mode": _as_list(workload.execution.mode),
                "matmul_precision": _as_list(workload.execution.matmul_precision),
                "data_parallel": _as_list(workload.parallel.data)}
    dtypes = spec.dtype if spec.dtype is not None else workload.model.dtype
    over = spec.scenario or ScenarioOverride()
    return {
        "dtype": _as_list(dtypes),
        "experts_implementation": _as_list(workload.model.experts_implementation),
        "batch_size": _as_list(over.batch_size or scen.batch_size),
        "input_length": _as_list(over.input_length or scen.input_length),
        "output_length": _as_list(over.output_length or scen.output_length),
        "execution_mode": _as_list(workload.execution.mode),
        "matmul_precision": _as_list(workload.execution.matmul_precision),
        "tensor_parallel": _as_list(workload.parallel.tensor),
        "expert_parallel": _as_list(workload.parallel.expert),
    }


def check_sweep_size(workload: Workload, scale: str = FULL_SCALE, *, source: str = "",
                     max_points: int = MAX_POINTS) -> int:
    """The number of points of one scale; a UserError naming the axes when it exceeds `max_points`."""
    axes = sweep_axes(workload, scale, source=source)
    n = math.prod(len(v) for v in axes.values())
    if n > max_points:
        sizes = " x ".join(f"{name} {len(values)}" for name, values in axes.items() if len(values) > 1)
        raise UserError(f"the sweep of scale '{scale}' has {n:,} points ({sizes}), above the limit of "
                        f"{max_points:,}; shorten an axis or raise the limit with --max-points",
                        where=source or None, field="scenario")
    return n


def expand(workload: Workload, scale: str = FULL_SCALE, *, source: str = "",
           max_points: int = MAX_POINTS) -> list[RunPoint]:
    """Resolve a scale and expand every list-valued axis into run points (cartesian product)."""
    check_sweep_size(workload, scale, source=source, max_points=max_points)
    axes = sweep_axes(workload, scale, source=source)
    if workload.scenario.kind == "serve":
        return _serve_points(workload, scale, axes, source)
    spec = workload.scales.get(scale, ScaleSpec())
    config = {**workload.model.config, **spec.config}
    if workload.scenario.kind == "train":
        return _train_points(workload, scale, axes, config, spec)
    points = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        points.append(
            RunPoint(
                workload=workload.name,
                scale=scale,
                family=workload.model.family,
                hub_id=workload.model.hub_id,
                weights=workload.model.weights,
                trust_remote_code=workload.model.trust_remote_code,
                model_config=config,
                scenario_kind=workload.scenario.kind,
                compile_options=dict(workload.execution.compile_options),
                measurement=workload.measurement.model_dump(),
                **values,
            )
        )
    return points


def _serve_points(workload: Workload, scale: str, axes: dict, source: str) -> list[RunPoint]:
    """Serve points: the model is the server's; a point is a load level and the request lengths."""
    scen = workload.scenario
    model = workload.model
    config = {**model.config, **workload.scales[scale].config} if model and scale != FULL_SCALE else (
        dict(model.config) if model else {})
    common = scen.model_dump(include={"endpoint", "exact_output", "request_timeout_s", "seed"})
    common.update(server=scen.server.model_dump(), slo=scen.slo.model_dump(),
                  num_requests=scen.load.num_requests, duration_s=scen.load.duration_s,
                  warmup_requests=scen.load.warmup_requests, workload_dir=str(Path(source).parent) if source else "")
    points = []
    for load, inputs, outputs in itertools.product(axes["load"], axes["input_length"], axes["output_length"]):
        points.append(RunPoint(
            workload=workload.name, scale=scale,
            family=model.family if model else None, hub_id=model.hub_id if model else None,
            weights=model.weights if model else "server", trust_remote_code=False,
            dtype=(model.dtype if model and isinstance(model.dtype, str) else "server"),
            experts_implementation=None, model_config=config,
            batch_size=None,   # a server batches as it likes; the load is params["load"]
            input_length=inputs if isinstance(inputs, int) else None,
            output_length=outputs if isinstance(outputs, int) else None,
            execution_mode="serve", scenario_kind="serve",
            params={**common, "load": load, "input_lengths": inputs, "output_lengths": outputs},
            measurement=workload.measurement.model_dump(),
        ))
    return points


def _train_points(workload: Workload, scale: str, axes: dict, config: dict, spec: ScaleSpec) -> list[RunPoint]:
    scen = workload.scenario
    dtype = spec.dtype if spec.dtype is not None else workload.model.dtype
    params = {"gradient_accumulation": scen.gradient_accumulation, "optimizer": scen.optimizer.model_dump(),
              "activation_checkpointing": scen.activation_checkpointing, "precision": scen.precision,
              "fsdp": workload.parallel.fsdp}
    points = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        points.append(RunPoint(
            workload=workload.name, scale=scale, family=workload.model.family, hub_id=workload.model.hub_id,
            weights=workload.model.weights, trust_remote_code=workload.model.trust_remote_code,
            dtype=dtype if isinstance(dtype, str) else dtype[0],
            experts_implementation=_as_list(workload.model.experts_implementation)[0],
            model_config=config, output_length=None, scenario_kind="train", params=params,
            compile_options=dict(workload.execution.compile_options),
            measurement=workload.measurement.model_dump(), **values))
    return points

"""The run point: one fully resolved point of a sweep, what a result file records as `point`."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass

# A point without a kind (results that predate scenarios) is an offline generate run.
DEFAULT_KIND = "generate"


def _jsonable(value):
    """What RunPoint.key writes for a value JSON has no form for: a dataclass as asdict makes it,
    anything else as its str()."""
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else str(value)


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
    scenario_kind: str = DEFAULT_KIND
    data_parallel: int = 1
    # execution.matmul_precision (None: the point's framework is not tpubench's, e.g. a server's).
    matmul_precision: str | None = None
    # Scenario-specific resolved values (serve: the load point, lengths, server, SLOs).
    params: dict = field(default_factory=dict, hash=False)
    compile_options: dict = field(default_factory=dict, hash=False)
    measurement: dict = field(default_factory=dict, hash=False)
    # model.routing (models/routing.py): "natural", "uniform" or a one-key dict (skewed, hot, trace).
    routing: object = field(default="natural", hash=False)
    # model.quantization (workload_spec/precision.py): "none" or the quantisation the weights get.
    quantization: str = "none"
    # model.quality: the quantised point's tolerance against its unquantised reference.
    quality: dict = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunPoint":
        return cls(**data)

    def key(self) -> str:
        """A stable hash of everything that defines what is measured (for --resume). A single-chip
        layout is left out of it, so points measured before `parallel` existed keep their key; so is
        matmul precision 'highest' (torch's own default before the field existed), and so are no
        quantisation and its (then unused) quality gate."""
        # A shallow copy is enough (only top-level names are dropped) and skips asdict's deep copy,
        # the larger part of a report's cost per result file; _jsonable writes a nested dataclass
        # as asdict would, so the blob, and the key, are the same.
        return _key_of_fields({f.name: getattr(self, f.name) for f in fields(self)})

    def model_identity(self) -> tuple:
        """What makes two points' models the same (one build serves both)."""
        return (self.family, self.hub_id, self.weights, self.dtype, self.experts_implementation,
                repr(sorted(self.model_config.items())), self.measurement.get("seed"), self.quantization,
                repr(sorted(self.quality.items())))

    @property
    def world_size(self) -> int:
        """Processes (one per chip) the point runs on."""
        return self.tensor_parallel * self.expert_parallel * self.data_parallel


# json.dumps(data, sort_keys=True, default=_jsonable) builds this encoder at every call, a third of
# its cost on a point's few fields (10,000 keys in a report: 0.04 s); built once, it writes the same text.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, default=_jsonable)


def _key_of_fields(data: dict) -> str:
    """RunPoint.key of the point whose every field is in `data` (the dict is changed)."""
    for name, default in (("tensor_parallel", 1), ("expert_parallel", 1), ("scenario_kind", DEFAULT_KIND),
                          ("params", {}), ("data_parallel", 1), ("routing", "natural"),
                          ("quantization", "none"), ("quality", {})):
        if data[name] == default:
            del data[name]
    if data.get("matmul_precision") in (None, "highest"):
        data.pop("matmul_precision", None)
    blob = _KEY_ENCODER.encode(data)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_REQUIRED = object()


@functools.lru_cache(maxsize=1)
def _field_defaults() -> tuple[tuple[str, object, object], ...]:
    """(name, default, default_factory) of each RunPoint field, _REQUIRED where it has none."""
    return tuple((f.name, _REQUIRED if f.default is MISSING else f.default,
                  None if f.default_factory is MISSING else f.default_factory) for f in fields(RunPoint))


def key_of_point_dict(point: dict) -> str:
    """RunPoint(**point).key() without building the RunPoint (a frozen dataclass sets each field
    through object.__setattr__: most of a key's cost when a report reads 10,000 result files).
    `point` holds only RunPoint's field names; a required one missing raises TypeError, as the
    constructor would. Fields are not type-checked by either, so the key is the same."""
    data = {}
    for name, default, factory in _field_defaults():
        if name in point:
            data[name] = point[name]
        elif factory is not None:
            data[name] = factory()
        elif default is _REQUIRED:
            raise TypeError(f"RunPoint missing required field {name!r}")
        else:
            data[name] = default
    return _key_of_fields(data)


def shape_words(point: dict) -> list[str]:
    """'b8 i1024 o128': the batch and lengths a point dict has (a server's may lack some)."""
    return [f"{tag}{point[key]}" for tag, key in (("b", "batch_size"), ("i", "input_length"), ("o", "output_length"))
            if point.get(key) is not None]


def layout_words(point: dict) -> list[str]:
    """'tp2', 'ep4', 'dp2': the parallel layout of a point dict, where it spans chips."""
    return [f"{tag}{point[key]}" for tag, key in (("tp", "tensor_parallel"), ("ep", "expert_parallel"),
                                                  ("dp", "data_parallel")) if (point.get(key) or 1) > 1]


def routing_label(routing) -> str:
    """Short words for a point's routing: 'uniform', 'zipf1.2', 'hot4@0.5', 'trace:file.json'."""
    if routing is None or isinstance(routing, str):
        return routing or "natural"
    kind, body = next(iter(routing.items()))
    if kind == "skewed":
        return f"zipf{body['zipf']:g}"
    if kind == "hot":
        return f"hot{body['experts']}@{body['share']:g}"
    return f"trace:{str(body.get('file', '')).replace(chr(92), '/').rsplit('/', 1)[-1]}"


def lengths_words(row) -> str:
    """'in1024 out128' of a result row ('~' for a length drawn per request)."""
    def length(v):
        return "~" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{int(v)}"

    return f"in{length(row['input_length'])} out{length(row['output_length'])}"

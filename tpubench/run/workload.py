"""Workload files: the schema assembled over the scenario registry, YAML loading, and every
problem as a one-line error naming file:line and field.

A workload names a model architecture (written out in full in the file, so no Hub access is
needed), named smaller scales of the same architecture, a scenario and how to measure it. Any
field typed `Axis[...]` may be a list: the cartesian product of all such lists is the sweep
(tpubench.run.sweep).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from tpubench.errors import UserError
from tpubench.scenarios import FieldProblem
from tpubench.scenarios.registry import SCENARIOS, schema_of
from tpubench.workload_spec.point import DEFAULT_KIND
from tpubench.workload_spec.precision import NONE, split_quantization
from tpubench.workload_spec.sections import (
    FULL_SCALE,
    Execution,
    Measurement,
    ModelSpec,
    Parallel,
    ScaleSpec,
    Strict,
    as_list,
    bad_number,
    safe_name,
)
from tpubench.workload_spec.service_level import ServiceLevel, Volume
from tpubench.workload_spec.targets import split_target

LAYOUT_FIELDS = ("tensor", "expert", "data")
# Bounds on what a workload file may make tpubench read (docs/workloads.md#limits). Real workloads
# are a few kB and a few hundred values; the shipped ones at most 8 kB.
MAX_FILE_BYTES = 1 << 20
# Values once every YAML alias is expanded: an alias bomb (10 levels of 9 aliases each) is a few
# hundred bytes that expand to 3.5 billion values, which validation would walk for hours.
MAX_VALUES = 100_000
# Chips one workload is decided between: each is estimated at every load the workload sweeps (a
# report over 200 took over a minute and 740 MB).
MAX_COMPARE_ON = 32


class Workload(Strict):
    """A workload file. Its `scenario:` is the section of one registered kind, typed by the model
    `schema_for` builds for that kind (this class alone validates no file: load_workload)."""

    # Built only as schema_for's models, each with its own `scenario` type.
    model_config = ConfigDict(defer_build=True)

    name: str
    description: str = ""
    model: ModelSpec | None = None     # what a scenario that builds a model builds (a server's: optional)
    scales: dict[str, ScaleSpec] = Field(default_factory=dict)
    scenario: Any
    execution: Execution = Execution()
    measurement: Measurement = Measurement()
    parallel: Parallel = Parallel()
    # The chips this workload is being decided between (`tpu-v6e-8`, `H100:8@fp8`, `trn2`): the
    # report estimates it on each and prices them beside your measured points (docs/answer.md).
    compare_on: list[str] = Field(default_factory=list)
    # What the answer is decided at (workload_spec/service_level.py): the service level one user
    # gets, and the tokens a day the fleet serves.
    slo: ServiceLevel | None = None
    volume: Volume | None = None

    _name_is_safe = field_validator("name")(classmethod(lambda cls, v: safe_name(v)))

    @field_validator("compare_on")
    @classmethod
    def _targets_are_chips(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_COMPARE_ON:
            raise ValueError(f"{len(value):,} chips; a workload is decided between at most {MAX_COMPARE_ON} "
                             "(each is estimated at every load it sweeps): name the ones you would buy")
        for spec in value:
            split_target(spec)      # its ValueError names what is wrong
        return value

    def scale_spec(self, scale: str) -> ScaleSpec:
        """A scale's spec; the full scale (the architecture under model.config) is the default one."""
        return self.scales.get(scale, ScaleSpec())

    @model_validator(mode="before")
    @classmethod
    def _default_kind(cls, data):
        """A scenario without a kind is the default kind (every workload was, before kinds existed)."""
        if isinstance(data, dict) and isinstance(data.get("scenario"), dict) and "kind" not in data["scenario"]:
            data = {**data, "scenario": {"kind": DEFAULT_KIND, **data["scenario"]}}
        return data

    @model_validator(mode="after")
    def _fits_its_scenario(self):
        scenario = SCENARIOS[self.scenario.kind]
        if scenario.builds_model and self.model is None:
            raise ValueError(f"model is required: scenario {scenario.kind} builds it")
        refused = [f for f in used_layout(self.parallel) if f not in scenario.layout]
        if refused:
            raise ValueError(layout_refusal(scenario, refused))
        return self

    @field_validator("scales")
    @classmethod
    def _no_full(cls, v):
        if FULL_SCALE in v:
            raise ValueError(f"'{FULL_SCALE}' is the architecture under model.config; name scales otherwise")
        for name in v:
            safe_name(name)
        return v


def _check_quantization(scenario, quantization: str) -> None:
    """Whether `scenario` can apply the weights' part of a model.quantization value (a model tpubench
    quantises and gates). Its KV cache's part is the estimate's as well as a run's: a run that cannot
    set it is refused when the sweep is made (run/sweep.py), not here, where `tpubench estimate` reads."""
    weights = split_quantization(quantization)[0]
    if weights != NONE and not scenario.quantizes:
        takes = ", ".join(sorted(s.kind for s in SCENARIOS.values() if s.quantizes))
        raise FieldProblem(("model", "quantization"),
                           f"scenario {scenario.kind} does not quantise the model it runs; a weight quantisation "
                           f"('{weights}') is for scenario {takes} (a server takes its engine's own flag in its args)")


def schema_for(data: dict) -> type[Workload]:
    """The model that validates a workload file's `data`: with the section of the kind it names
    alone where that kind is registered (every kind's section costs ~100 ms of pydantic at start-up),
    else with every kind's, whose error says what is wrong with the kind (or the section)."""
    scenario = data.get("scenario")
    kind = scenario.get("kind", DEFAULT_KIND) if isinstance(scenario, dict) else None
    if isinstance(kind, str) and kind in SCENARIOS:
        return _with_sections((schema_of(kind),))
    return _with_sections(tuple(schema_of(kind) for kind in SCENARIOS))


@functools.lru_cache(maxsize=None)
def _with_sections(sections: tuple[type[BaseModel], ...]) -> type[Workload]:
    # A union even of one section, told apart by `kind`: pydantic then names the kind in an error's
    # location as it does for the union of all (the loader drops it), so errors read the same.
    section = Annotated[Union[sections], Field(discriminator="kind")]
    return create_model("Workload", __base__=Workload, __module__=__name__, scenario=(section, ...))


def used_layout(parallel: Parallel) -> list[str]:
    """The `parallel` fields a workload sets beyond one chip."""
    used = [f for f in LAYOUT_FIELDS if max(as_list(getattr(parallel, f))) > 1]
    return used + (["fsdp"] if parallel.fsdp else [])


def layout_refusal(scenario, refused: list[str], name=lambda f: f"parallel.{f}") -> str:
    """Why a scenario does not take these layout fields (named by `name`: the file's or a flag's),
    and which scenarios do."""
    takes = ", ".join(map(name, scenario.layout)) or "no parallel layout (a server shards its own model)"
    others = sorted({s.kind for s in SCENARIOS.values() for f in refused if f in s.layout})
    where = (f"; {' and '.join(map(name, refused))} {'is' if len(refused) == 1 else 'are'} for scenario "
             f"{', '.join(others)}") if others else ""
    return f"scenario {scenario.kind} takes {takes}{where}"


# ----------------------------------------------------------------------------- loading


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file; every problem is a UserError naming file:line and field."""
    path = Path(path)
    if not path.is_file():
        raise UserError("no such workload file", where=str(path))
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(f"{size:,} bytes; a workload file is at most {MAX_FILE_BYTES:,} (prompts, traces and "
                        "routing histograms go in files of their own that the workload names)", where=str(path))
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UserError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x}): save the file as UTF-8",
                        where=f"{path}:{line}") from None
    try:
        data, root = _parse_yaml(text)
    except _TooManyDigits as exc:
        raise UserError(f"a number of {exc.digits:,} digits: no workload value is that large",
                        where=f"{path}:{exc.line}") from None
    except _TooManyValues as exc:
        raise _user_error(path, exc.root, exc.loc, exc.message) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"YAML syntax error: {problem}", where=where) from None
    if data is None:
        raise UserError("the file is empty; expected a mapping with name, model and scenario", where=str(path))
    if not isinstance(data, dict):
        raise UserError(f"expected a mapping at the top level, found {type(data).__name__}", where=str(path))
    number = bad_number(data)
    if number:
        raise _user_error(path, root, *number)
    try:
        # The directory of the file: where a routing trace named in it is read from.
        schema = schema_for(data)
        workload = schema.model_validate(data, context={"workload_dir": str(path.parent)})
    except ValidationError as exc:
        err = _clearest(exc.errors())
        loc = tuple(err["loc"])
        if err["type"] == "union_tag_invalid":   # the tag's own key: `kind:`'s line, not the section's
            loc += (str(err["ctx"]["discriminator"]).strip("'"),)
        # The scenario's kind (pydantic's union tag) is in loc but not in the file.
        shown = tuple(p for i, p in enumerate(loc) if not (i == 1 and loc[0] == "scenario" and p in SCENARIOS))
        # A tagged union (model.routing) repeats its tag before the member's own key: name it once.
        shown = tuple(p for i, p in enumerate(shown) if i == 0 or p != shown[i - 1])
        raise _user_error(path, root, shown, _explain(err, loc, schema)) from None
    _check_model(workload, path, root)
    return workload


def where_in(path: str | Path, loc: tuple) -> str:
    """'file:line' of the field at `loc` in a workload file that loaded: for a check made after
    loading, against tables the loader does not read (a `compare_on` chip against the price and
    spec tables, in the commands)."""
    loader = _SafeLoader(Path(path).read_text(encoding="utf-8"))
    try:
        line = _line_of(loader.get_single_node(), loc)
    finally:
        loader.dispose()
    return f"{path}:{line}" if line else str(path)


# libyaml's parser where PyYAML has it (several times faster), with the same safe constructor.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _TooManyDigits(Exception):
    def __init__(self, line: int, digits: int):
        self.line, self.digits = line, digits


class _TooManyValues(Exception):
    def __init__(self, root, loc: tuple, message: str):
        self.root, self.loc, self.message = root, loc, message


def _parse_yaml(text: str) -> tuple[Any, Any]:
    """The file's data and its node tree (whose marks give line numbers), from one parse: the same
    as yaml.safe_load (safe constructor only) plus yaml.compose; a tree that aliases expand beyond
    MAX_VALUES, or that an alias makes contain itself, is refused before it is built."""
    loader = _SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _check_expansion(root)
        try:
            return (loader.construct_document(root) if root is not None else None), root
        except ValueError:
            # Python reads no integer of more than 4300 digits (int_max_str_digits): name its line.
            node = _long_int(root)
            if node is None:
                raise
            raise _TooManyDigits(node.start_mark.line + 1, len(node.value)) from None
    finally:
        loader.dispose()


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


class _Cycle(Exception):
    pass


def _expanded_size(node, sizes: dict[int, int]) -> int:
    """How many values `node` of the composed tree holds once aliases are expanded. An alias is the
    very node its anchor marks, so each node is counted once (memoised by id in `sizes`, shared
    across calls) and shared ones are summed, never walked again. Iterative; _Cycle when an alias is
    inside the node it names (a value that would contain itself)."""
    open_nodes: set[int] = set()      # nodes whose values are being counted: the current path
    stack = [(node, False)]
    while stack:
        current, counted = stack.pop()
        key = id(current)
        if counted:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(current))
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _Cycle
        open_nodes.add(key)
        stack.append((current, True))
        stack.extend((child, False) for child in _children(current) if id(child) not in sizes)
    return sizes[id(node)]


def _check_expansion(root) -> None:
    """Refuse a tree that YAML aliases expand beyond MAX_VALUES, or make contain itself, naming the
    top-level field that holds the most (or the cycle)."""
    pairs = [(key.value, value) for key, value in root.value] if isinstance(root, yaml.MappingNode) else [(None, root)]
    sizes: dict[int, int] = {}
    held = {}
    for name, value in pairs:
        try:
            held[name] = _expanded_size(value, sizes)
        except _Cycle:
            raise _TooManyValues(root, (name,) if name is not None else (),
                                 "a YAML alias (*name) inside the value its anchor (&name) marks: the value "
                                 "would contain itself") from None
    total = len(pairs) + sum(held.values())
    if total > MAX_VALUES:
        name = max(held, key=held.get)
        raise _TooManyValues(root, (name,) if name is not None else (),
                             f"YAML aliases (*name) expand the file to {total:,} values; a workload holds at "
                             f"most {MAX_VALUES:,}")


def _long_int(node):
    """The first integer scalar under `node` too long for Python to read (iterative: the tree may be deep)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.ScalarNode):
            if n.tag == "tag:yaml.org,2002:int" and len(n.value) > 4300:
                return n
        elif isinstance(n, yaml.MappingNode):
            stack.extend(v for pair in reversed(n.value) for v in reversed(pair))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
    return None


def _user_error(path: Path, root, loc: tuple, message: str) -> UserError:
    line = _line_of(root, loc)
    where = f"{path}:{line}" if line else str(path)
    return UserError(message, where=where, field=_dotted(loc) or None)


def _check_model(workload: Workload, path: Path, root) -> None:
    """The family and every scale's resolved config values, against the table of transformers'
    config classes (no transformers import: see models/config_check.py); then what the scenario
    itself checks of each scale."""
    from tpubench.models.config_check import ConfigProblem, check_model_config, family_problem

    scenario = SCENARIOS[workload.scenario.kind]
    try:
        if workload.model is None:
            scenario.check_workload(workload, FULL_SCALE, {})
            return
        problem = family_problem(workload.model.family)
        if problem:
            raise _user_error(path, root, ("model", "family"), problem)
        for quantization in as_list(workload.model.quantization):
            _check_quantization(scenario, quantization)
        for scale in [FULL_SCALE, *workload.scales]:
            own = workload.scales[scale].config if scale != FULL_SCALE else {}
            try:
                check_model_config(workload.model.family, {**workload.model.config, **own},
                                   tensor=as_list(workload.parallel.tensor), expert=as_list(workload.parallel.expert))
            except ConfigProblem as exc:
                if exc.path[0] == "parallel":
                    raise _user_error(path, root, exc.path, f"{exc.message} (scale '{scale}')") from None
                prefix = ("scales", scale, "config") if exc.path[0] in own else ("model", "config")
                raise _user_error(path, root, prefix + exc.path, exc.message) from None
            scenario.check_workload(workload, scale, {**workload.model.config, **own})
    except FieldProblem as exc:
        raise _user_error(path, root, exc.loc, exc.message) from None


def _clearest(errors: list[dict]) -> dict:
    """The error to show: the first, unless it is a union member's type mismatch and another member
    says what is wrong with the same value (`batch_size: [1, 10**15]`: not "a valid integer" from
    the scalar member, but the list member's "less than or equal to 65536" at item 1), or a missing
    field beside an unknown key of the same section (`batch_sizes` for `batch_size`: the unknown
    key, with its did-you-mean, says what to fix)."""
    first = errors[0]
    if first["type"] == "missing":
        import difflib

        missing = str(first["loc"][-1])
        for e in errors:
            if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == tuple(first["loc"][:-1]) \
                    and difflib.get_close_matches(str(e["loc"][-1]), [missing], n=1):
                return {**e, "suggest": missing}
    if not first["type"].endswith(("_type", "_parsing")):
        return first
    field = _dotted(first["loc"])
    same = [e for e in errors if _dotted(e["loc"]).startswith(field)]
    return next((e for e in same if not e["type"].endswith(("_type", "_parsing"))), None) \
        or next((e for e in same if len(_dotted(e["loc"])) > len(field)), first)   # a list's item over the list


def _dotted(loc: tuple) -> str:
    # pydantic puts union member names ("list[...]", "int") into loc; they mean nothing to a user.
    keep = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p in _TYPE_NAMES))]
    return ".".join(keep)


_TYPE_NAMES = {"int", "str", "float", "bool", "literal", "none", "dict", "list", "function-after", "constrained-int",
               "constrained-float"}


def _explain(err: dict, loc: tuple, schema: type[Workload]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        import difflib  # only for a file with an error: not at start-up

        key = str(loc[-1])
        allowed = _allowed_keys(loc[:-1], schema)
        guess = [err["suggest"]] if "suggest" in err else difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean '{guess[0]}'?" if guess else f"; allowed: {', '.join(sorted(allowed))}"
        return f"unknown key '{key}'{hint}"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":   # scenario.kind, model.routing's tag: a name, not a block
        import difflib

        tag, tags = str(err["ctx"]["tag"]), [t.strip(" '") for t in str(err["ctx"]["expected_tags"]).split(",")]
        guess = difflib.get_close_matches(tag, tags, n=1)
        hint = f"; did you mean '{guess[0]}'?" if guess else ""
        return f"unknown {loc[-1]} '{tag}'{hint} (one of {', '.join(tags)})"
    msg = err["msg"].removeprefix("Value error, ")
    if "input" in err and kind not in ("missing",):
        msg = f"{msg} (got {_shown(err['input'])})"
    return msg


def _shown(value: Any, limit: int = 80) -> str:
    """A value as an error quotes it: its repr, cut to `limit` characters (a block, or a list of a
    thousand entries, is not repeated back on the error's one line)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]} ...{ {'[': ']', '{': '}', '(': ')'}.get(text[0], '')}"


def _allowed_keys(loc: tuple, schema: type[Workload]) -> list[str]:
    model: type[BaseModel] | None = schema
    for i, part in enumerate(loc):
        if model is None:
            return []
        if i == 1 and loc[0] == "scenario" and part in SCENARIOS:
            model = schema_of(part)
        elif part in model.model_fields:
            ann = model.model_fields[part].annotation
            model = _model_in(ann)
        elif model is schema and loc and loc[0] == "scales":
            model = ScaleSpec
        else:
            model = _model_in(None)
    return list(model.model_fields) if model else []


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

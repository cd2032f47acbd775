"""The table of model-config keys, types and rope settings per transformers family, and its generator.

`tpubench validate` must answer in well under a second, and importing even one transformers config
class pulls in torch (seconds). So the facts a validator needs about a family's config class (its
keys and their types, the rope types and their keys, the allowed layer types) are read from
transformers once, by `python -m tpubench.models.config_table`, and shipped as
`tpubench/data/model_configs.json`. tests/test_model_config.py regenerates the table from the
installed transformers and fails when the two are out of step. transformers itself is consulted
only when a model is built.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import re
import sys
from pathlib import Path

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "model_configs.json"

# Decoder families whose configs the table covers in full: the shipped workloads' families and the
# open-weight LLMs teams most often benchmark. Any other transformers model_type still runs; its
# config is checked by transformers when the model is built.
FAMILIES = (
    "qwen3_moe", "qwen3", "gemma4_text", "gemma3_text", "llama", "mistral", "mixtral", "qwen2",
    "qwen2_moe", "olmoe", "deepseek_v3", "gpt_oss", "phi3", "granitemoe", "glm4_moe",
)

# Keys every config class has but that are bookkeeping, not architecture: a workload has no reason
# to set them (they describe a saved checkpoint or a training head).
_BOOKKEEPING = {"transformers_version", "architectures", "output_hidden_states", "return_dict",
                "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id", "problem_type",
                "output_attentions", "torchscript", "name_or_path", "_name_or_path"}
# `config.<name>` reads in the modeling code that are methods or runtime state, not settings.
_NOT_SETTINGS = {"get_text_config", "to_dict", "to_json_string", "get", "use_return_dict", "is_encoder_decoder",
                 "num_labels", "pruned_heads", "output_attentions", "output_hidden_states", "return_dict",
                 "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "is_decoder", "name_or_path"}
_CONFIG_READ = re.compile(r"""\bconfig\.([a-z][a-z0-9_]*)\b"""
                          r"""|getattr\(\s*(?:self\.)?config\s*,\s*["']([a-z][a-z0-9_]*)["']"""
                          r"""|kwargs\.(?:pop|get)\(\s*["']([a-z][a-z0-9_]*)["']""")


# ----------------------------------------------------------------------------- reading the table


@functools.lru_cache(maxsize=1)
def load_table() -> dict:
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- generating it


def type_spec(annotation) -> list:
    """A JSON-able type spec: a list of "int" | "float" | "bool" | "str" | "list" | "dict" | "null" |
    "any" | {"literal": [...]}. Annotations arrive as objects or (postponed) strings."""
    text = annotation if isinstance(annotation, str) else _annotation_text(annotation)
    return _parse_annotation(text)


def _annotation_text(annotation) -> str:
    if isinstance(annotation, type):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return str(annotation).replace("typing.", "")


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_annotation(text: str) -> list:
    out: list = []
    for part in _split_top(text, "|"):
        head, _, inner = part.partition("[")
        inner = inner[:-1] if inner.endswith("]") else inner
        head = head.strip().rsplit(".", 1)[-1] if head.strip() not in ("torch.dtype",) else "torch.dtype"
        if head in ("None", "NoneType"):
            kinds = ["null"]
        elif head in ("int", "float", "bool", "str"):
            kinds = [head]
        elif head in ("list", "List", "tuple", "Tuple", "Sequence"):
            kinds = ["list"]
        elif head in ("dict", "Dict", "Mapping", "RopeParameters"):
            kinds = ["dict"]
        elif head == "torch.dtype":
            kinds = ["str"]
        elif head == "Optional":
            kinds = _parse_annotation(inner) + ["null"]
        elif head == "Union":
            kinds = _parse_annotation(" | ".join(_split_top(inner, ",")))
        elif head == "Literal":
            kinds = [{"literal": [ast.literal_eval(v) for v in _split_top(inner, ",")]}]
        else:
            kinds = ["any"]
        for k in kinds:
            if k not in out:
                out.append(k)
    return out or ["any"]


def _rope_keys(config_class) -> dict[str, dict[str, list[str]]]:
    """Required and optional keys per rope_type, captured from transformers' own validators."""

    class Captured(Exception):
        pass

    found: dict[str, dict[str, list[str]]] = {}

    def capture(rope_type, received, required, optional_keys=None, ignore_keys=None):
        raise Captured(sorted(required | {"rope_type"}), sorted((optional_keys or set()) | {"partial_rotary_factor"}))

    probe = type("Probe", (), {"_check_received_keys": staticmethod(capture), "max_position_embeddings": 1,
                               "head_dim": 2, "hidden_size": 2, "num_attention_heads": 1})()
    for name in dir(config_class):
        match = re.fullmatch(r"_validate_(\w+)_rope_parameters", name)
        if not match:
            continue
        rope_type = match.group(1)
        try:
            getattr(config_class, name)(probe, {"rope_type": rope_type}, ignore_keys=None)
        except Captured as got:
            found[rope_type] = {"required": got.args[0], "optional": got.args[1]}
        except Exception:  # a validator that reads a key before checking: not captured, left out
            continue
    return found


def _family_entry(family: str) -> dict:
    import importlib.util

    from transformers import CONFIG_MAPPING
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    cls = CONFIG_MAPPING[family]
    keys = {f.name: type_spec(f.type) for f in dataclasses.fields(cls) if f.name not in _BOOKKEEPING}
    # Keys read by the modeling code without being dataclass fields (head_dim on qwen3_moe,
    # global_head_dim on gemma4): transformers accepts them as extra attributes and uses them.
    module = model_type_to_module_name(family)
    extra: set[str] = set()
    for kind in ("modeling", "configuration"):
        spec = importlib.util.find_spec(f"transformers.models.{module}.{kind}_{module}")
        if spec and spec.origin:
            for groups in _CONFIG_READ.findall(Path(spec.origin).read_text(encoding="utf-8")):
                extra.add(next(g for g in groups if g))
    for name in sorted(extra - set(keys) - _NOT_SETTINGS - _BOOKKEEPING):
        if not callable(getattr(cls, name, None)) and not isinstance(getattr(cls, name, None), property):
            keys[name] = ["any"]
    aliases = {k: v for k, v in getattr(cls, "attribute_map", {}).items() if v in keys}
    return {
        "config_class": cls.__name__,
        "keys": dict(sorted(keys.items())),
        "aliases": dict(sorted(aliases.items())),
        "rope_ignore_keys": sorted(getattr(cls, "ignore_keys_at_rope_validation", None) or ()),
    }


def generate_table(families=FAMILIES) -> dict:
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.configuration_utils import ALLOWED_ATTN_LAYER_TYPES, ALLOWED_MLP_LAYER_TYPES
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return {
        "generated_by": "python -m tpubench.models.config_table",
        "transformers_version": transformers.__version__,
        "model_types": sorted(CONFIG_MAPPING_NAMES),
        "layer_types": sorted(ALLOWED_ATTN_LAYER_TYPES),
        "mlp_layer_types": sorted(ALLOWED_MLP_LAYER_TYPES),
        "rope_types": _rope_keys(CONFIG_MAPPING[families[0]]),
        "families": {family: _family_entry(family) for family in families},
    }


def write_table(table: dict, path: Path = TABLE_PATH) -> None:
    path.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_table(generate_table())
    print(f"wrote {TABLE_PATH} (transformers {load_table()['transformers_version']})", file=sys.stderr)

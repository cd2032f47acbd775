"""Model shapes for the estimate: the published models' architectures (shipped as data, with their
sources: data/published_models.json), the bytes per element of a published precision, and a
point's precision as the roofline needs it (bytes per weight and per cached value, the format its
matmuls run in) from three dtypes or a publisher's one-word summary."""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpubench.hardware.model_shape import ModelShape

PUBLISHED_MODELS = Path(__file__).resolve().parent.parent / "data" / "published_models.json"

# Bytes per weight of the formats publishers name. Block-scaled 4-bit formats (MXFP4, NVFP4) carry
# a scale per 16-32 weights: 4.25-4.5 bits, taken as 0.5 byte (the efficiency absorbs the rest).
_PRECISION_BYTES = {"fp32": 4.0, "float32": 4.0, "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0,
                    "fp8": 1.0, "float8": 1.0, "int8": 1.0, "w8a8": 1.0, "fp4": 0.5, "float4": 0.5, "mxfp4": 0.5,
                    "nvfp4": 0.5, "int4": 0.5, "w4a16": 0.5}
_SHORT = {"float32": "fp32", "fp32": "fp32", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16",
          "float8e4m3fn": "fp8", "float8e5m2": "fp8", "float8": "fp8", "fp8": "fp8", "int8": "int8",
          "float4e2m1": "fp4", "fp4": "fp4", "mxfp4": "fp4", "nvfp4": "fp4", "int4": "int4"}
# Short names of the 16- and 32-bit formats: a precision in one of them throughout is named in one word.
_WIDE = {"fp32", "bf16", "fp16"}


def _key(name: str) -> str:
    """'deepseek-ai/DeepSeek-R1-0528' -> 'deepseekr10528': organisation and punctuation ignored."""
    return re.sub(r"[^a-z0-9]", "", str(name).rsplit("/", 1)[-1].lower())


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, tuple[str, str, dict[str, Any], str]]:
    data = json.loads(PUBLISHED_MODELS.read_text(encoding="utf-8"))
    out = {}
    for model_id, entry in data["models"].items():
        for alias in [model_id, *entry.get("aliases", [])]:
            out[_key(alias)] = (model_id, entry["family"], entry["config"], entry.get("source", ""))
    return out


def published_model(name: str | None) -> tuple[str, ModelShape] | None:
    """(model id, shape) of a model a published row names, or None when tpubench has no config for it."""
    if name is None or (isinstance(name, float) and math.isnan(name)):
        return None
    hit = _table().get(_key(name))
    if hit is None:
        return None
    model_id, family, config, _ = hit
    return model_id, _shape(model_id, family)


@functools.lru_cache(maxsize=None)
def _shape(model_id: str, family: str) -> ModelShape:
    config = next(c for m, f, c, _ in _table().values() if m == model_id)
    return ModelShape.from_config(family, config)


def _label(precision: Any) -> str | None:
    if precision is None or (isinstance(precision, float) and math.isnan(precision)):
        return None
    return re.sub(r"[\s_-]", "", str(precision).lower().removeprefix("torch."))


def compute_precision(precision: Any) -> str:
    """The format a precision label's matmuls run in, which picks the chip's peak FLOP/s: weight-only
    quantisation ('int8 weights', W4A16) dequantises to 16 bits before the matmul, so it runs at the
    bf16 peak; everything else at its own (`hardware.accelerators.chip_peak_flops`)."""
    label = _label(precision) or ""
    if "weight" in label or re.search(r"w\d+a16", label):
        return "bf16"
    return label


def precision_bytes(precision: Any) -> float | None:
    """Bytes per weight of a precision label ('fp8', 'bfloat16', 'mxfp4'...); None when unknown."""
    label = _label(precision)
    if label is None:
        return None
    if label in _PRECISION_BYTES:
        return _PRECISION_BYTES[label]
    for tag, size in sorted(_PRECISION_BYTES.items(), key=lambda kv: -len(kv[0])):
        if tag in label:
            return size
    return None


def cache_bytes(precision: Any) -> float | None:
    """Bytes per cached K/V element: engines keep the cache in 16 bits unless told otherwise (an fp8
    or fp4 checkpoint still caches bf16 by default in vLLM and SGLang), and a float32 model caches
    float32. One rule for published rows, measured rows and workloads alike."""
    size = precision_bytes(precision)
    return None if size is None else max(2.0, size)


def _given(value: Any) -> str | None:
    """A dtype cell as text; None when empty or NaN (the source does not state it)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def short_dtype(dtype: Any) -> str:
    """'bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8', 'int8 weights' -> 'int8'; unknown names as
    written."""
    label = _label(dtype) or ""
    if label in _SHORT:
        return _SHORT[label]
    for tag, short in sorted(_SHORT.items(), key=lambda kv: -len(kv[0])):
        if tag in label:
            return short
    return str(dtype)


@dataclass(frozen=True)
class PointPrecision:
    """What the roofline needs of a point's precision, and how tables name it."""

    weight_bytes: float
    kv_bytes: float
    compute: str       # the format the matmuls take as inputs: picks the chip's peak FLOP/s
    label: str         # 'bf16', or 'w fp8 / a fp8 / kv fp8' when the three differ or any is narrower than 16 bits

    @staticmethod
    def of(weight: Any, activation: Any, kv_cache: Any, summary: Any = None) -> "PointPrecision | None":
        """From three dtypes, each falling back on `summary` (a publisher's one word: 'fp8', 'int8
        weights') where not given: the weights' bytes from `weight`, the cache's from `kv_cache`
        (cache_bytes' rule for a summary), the matmul format from `activation` (compute_precision's
        rule for a summary). None when the weights' or the cache's bytes cannot be told."""
        weight, activation, kv_cache = _given(weight), _given(activation), _given(kv_cache)
        weight_bytes = precision_bytes(weight) if weight else precision_bytes(summary)
        kv_bytes = precision_bytes(kv_cache) if kv_cache else cache_bytes(summary)
        if weight_bytes is None or kv_bytes is None:
            return None
        compute = _label(activation) if activation else compute_precision(summary)
        cache_name = short_dtype(kv_cache) if kv_cache else {4.0: "fp32", 2.0: "bf16"}.get(kv_bytes, short_dtype(summary))
        names = [short_dtype(weight or summary), short_dtype(compute), cache_name]
        # One word only for a 16- or 32-bit model throughout: 'fp8' alone would not say the cache's.
        one_word = len(set(names)) == 1 and names[0] in _WIDE
        label = names[0] if one_word else f"w {names[0]} / a {names[1]} / kv {names[2]}"
        return PointPrecision(weight_bytes=weight_bytes, kv_bytes=kv_bytes, compute=compute, label=label)


def model_distance(shape: ModelShape, mine: ModelShape) -> float:
    """How far one model is from another for a comparison: inf across kinds (dense, mixture-of-experts),
    else |ln active-parameter ratio| + |ln total-parameter ratio| / 2 (what a token touches matters most)."""
    if (shape.n_experts > 0) != (mine.n_experts > 0):
        return math.inf
    return (abs(math.log(shape.active_params / mine.active_params))
            + abs(math.log(shape.total_params / mine.total_params)) / 2)


def row_precision(row: dict) -> PointPrecision | None:
    """A calibration row's precision: its weight/activation/KV dtype columns where the source states
    them, else its `precision` summary."""
    return PointPrecision.of(row.get("weight_dtype"), row.get("activation_dtype"), row.get("kv_cache_dtype"),
                             row.get("precision"))


__all__ = ["PUBLISHED_MODELS", "PointPrecision", "cache_bytes", "compute_precision", "model_distance", "precision_bytes",
           "published_model", "row_precision", "short_dtype"]

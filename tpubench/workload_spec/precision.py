"""A point's precision as three dtypes: what its weights are stored in, what its matmuls take as
inputs (activations), and what its KV cache holds. `model.dtype` alone says all three; a
quantisation (`model.quantization`, a sweep axis; a chip's `@...` in `--on` and `compare_on`)
changes them, written one way everywhere:

    fp8             fp8 weights and activations, the KV cache in the model dtype
    kv_fp8          the model dtype's weights and activations, an fp8 (e4m3) KV cache
    fp8+kv_fp8      both: fp8 weights, activations and cache

that is, a weight quantisation (QUANTIZATIONS), a KV-cache one (`kv_` and a KV_CACHE_DTYPES name),
or both joined by `+`, weights first. `canonical_quantization` reads any spelling and gives that one
(`kv_fp8+fp8` and `none+kv_fp8` read as `fp8+kv_fp8` and `kv_fp8`); results, point keys and labels
hold the canonical one.

Pure names, no framework: results, the roofline, reports and the estimate read them; the torch
backend applies the weight part (models/quantization.py); a server takes the KV part as its
engine's flag (serving/presets.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

NONE = "none"
# none: the model dtype throughout. int8_weight_only: int8 weights (per-channel scales), matmuls
# in the model dtype. int8_dynamic: int8 weights and activations quantised per token at run time
# (w8a8). fp8 / fp8_rowwise: float8_e4m3fn weights and activations, one scale per tensor or per
# row. fp4: 4-bit float weights and activations (NVIDIA's nvfp4; Blackwell only).
QUANTIZATIONS: tuple[str, ...] = ("none", "int8_weight_only", "int8_dynamic", "fp8", "fp8_rowwise", "fp4")
# The KV-cache dtypes a `kv_` part may name: fp8 is e4m3, what vLLM's `--kv-cache-dtype fp8`, SGLang's
# `fp8_e4m3`, NxD Inference's kv_cache_quant and tpu-inference store (docs/precision.md).
KV_CACHE_DTYPES: dict[str, str] = {"fp8": "float8_e4m3fn"}
KV_PREFIX = "kv_"
JOIN = "+"

_WEIGHT = {"int8_weight_only": "int8", "int8_dynamic": "int8", "fp8": "float8_e4m3fn",
           "fp8_rowwise": "float8_e4m3fn", "fp4": "float4_e2m1"}
_ACTIVATION = {"int8_dynamic": "int8", "fp8": "float8_e4m3fn", "fp8_rowwise": "float8_e4m3fn",
               "fp4": "float4_e2m1"}
_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int8": "int8", "float8_e4m3fn": "fp8",
          "float4_e2m1": "fp4"}
# Formats narrower than 16 bits: a precision with any of them is named dtype by dtype, never by one
# word ('fp8' alone is what publishers write for fp8 weights beside a bf16 cache).
_NARROW = {"int8", "float8_e4m3fn", "float4_e2m1"}
WRITTEN = "write a quantisation (" + ", ".join(QUANTIZATIONS[1:]) + "), " + \
    ", ".join(KV_PREFIX + k for k in KV_CACHE_DTYPES) + ", or both joined by + (fp8+kv_fp8)"


@dataclass(frozen=True)
class Precision:
    weight_dtype: str
    activation_dtype: str
    kv_cache_dtype: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def label(self) -> str:
        """'bf16' when all three agree in a 16- or 32-bit format, else 'w fp8 / a fp8 / kv fp8'."""
        dtypes = (self.weight_dtype, self.activation_dtype, self.kv_cache_dtype)
        w, a, kv = (_SHORT.get(d, d) for d in dtypes)
        one_word = w == a == kv and not _NARROW & set(dtypes)
        return w if one_word else f"w {w} / a {a} / kv {kv}"


def split_quantization(text: str | None) -> tuple[str, str | None]:
    """(weight quantisation, KV-cache dtype name or None) of a quantisation as written (module
    notes); ValueError, one line, naming what is wrong."""
    raw = NONE if text is None else str(text).strip()
    weights, kv = [], []
    for part in raw.split(JOIN):
        part = part.strip()
        if part.startswith(KV_PREFIX) and part[len(KV_PREFIX):] in KV_CACHE_DTYPES:
            kv.append(part[len(KV_PREFIX):])
        elif part in QUANTIZATIONS:
            weights.append(part)
        elif part.startswith(KV_PREFIX):
            raise ValueError(f"unknown KV-cache dtype '{part[len(KV_PREFIX):]}' in '{raw}': "
                             f"{', '.join(KV_PREFIX + k for k in KV_CACHE_DTYPES)}")
        else:
            raise ValueError(f"unknown quantization '{part or raw}': {WRITTEN}")
    if len(weights) > 1 or len(kv) > 1:
        raise ValueError(f"'{raw}' names {'two weight quantisations' if len(weights) > 1 else 'two KV-cache dtypes'}: "
                         f"{WRITTEN}")
    return (weights[0] if weights else NONE), (kv[0] if kv else None)


def canonical_quantization(text: str | None) -> str:
    """The one spelling of a quantisation: 'fp8+kv_fp8', 'kv_fp8', 'fp8', 'none' (module notes)."""
    weights, kv = split_quantization(text)
    parts = ([weights] if weights != NONE or kv is None else []) + ([KV_PREFIX + kv] if kv else [])
    return JOIN.join(parts)


def weight_quantization(quantization: str | None) -> str:
    """The part of a quantisation that changes the model's weights (and activations): 'fp8' of
    'fp8+kv_fp8', 'none' of 'kv_fp8'."""
    return split_quantization(quantization)[0]


def kv_cache_quantization(quantization: str | None) -> str | None:
    """The KV-cache dtype name a quantisation sets ('fp8' of 'fp8+kv_fp8'); None: the model dtype's."""
    return split_quantization(quantization)[1]


def precision_of(dtype: str, quantization: str | None = NONE) -> Precision:
    """The three dtypes of a point with model dtype `dtype` and `quantization` (None = none)."""
    weights, kv = split_quantization(quantization)
    return Precision(weight_dtype=_WEIGHT.get(weights, dtype), activation_dtype=_ACTIVATION.get(weights, dtype),
                     kv_cache_dtype=KV_CACHE_DTYPES[kv] if kv else dtype)


def quantized(point: dict) -> bool:
    """Whether a point dict (or RunPoint) runs a quantised model."""
    value = point.get("quantization") if isinstance(point, dict) else getattr(point, "quantization", None)
    return (value or NONE) != NONE

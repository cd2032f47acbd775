"""A point's precision as three dtypes: what its weights are stored in, what its matmuls take as
inputs (activations), and what its KV cache holds. `model.dtype` alone says all three; a
quantisation (`model.quantization`, a sweep axis) changes the weights' and possibly the
activations' dtype, never the KV cache's (tpubench keeps the cache in the model dtype).

Pure names, no framework: results, the roofline, reports and the estimate read them; the torch
backend applies them (models/quantization.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

NONE = "none"
# none: the model dtype throughout. int8_weight_only: int8 weights (per-channel scales), matmuls
# in the model dtype. int8_dynamic: int8 weights and activations quantised per token at run time
# (w8a8). fp8 / fp8_rowwise: float8_e4m3fn weights and activations, one scale per tensor or per
# row. fp4: 4-bit float weights and activations (NVIDIA's nvfp4; Blackwell only).
Quantization = Literal["none", "int8_weight_only", "int8_dynamic", "fp8", "fp8_rowwise", "fp4"]
QUANTIZATIONS: tuple[str, ...] = ("none", "int8_weight_only", "int8_dynamic", "fp8", "fp8_rowwise", "fp4")

_WEIGHT = {"int8_weight_only": "int8", "int8_dynamic": "int8", "fp8": "float8_e4m3fn",
           "fp8_rowwise": "float8_e4m3fn", "fp4": "float4_e2m1"}
_ACTIVATION = {"int8_dynamic": "int8", "fp8": "float8_e4m3fn", "fp8_rowwise": "float8_e4m3fn",
               "fp4": "float4_e2m1"}
_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int8": "int8", "float8_e4m3fn": "fp8",
          "float4_e2m1": "fp4"}


@dataclass(frozen=True)
class Precision:
    weight_dtype: str
    activation_dtype: str
    kv_cache_dtype: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def label(self) -> str:
        """'bf16' when all three agree, else 'w int8 / a bf16 / kv bf16'."""
        w, a, kv = (_SHORT.get(d, d) for d in (self.weight_dtype, self.activation_dtype, self.kv_cache_dtype))
        return w if w == a == kv else f"w {w} / a {a} / kv {kv}"


def precision_of(dtype: str, quantization: str | None = NONE) -> Precision:
    """The three dtypes of a point with model dtype `dtype` and `quantization` (None = none)."""
    q = quantization or NONE
    if q not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {q!r}: expected one of {', '.join(QUANTIZATIONS)}")
    return Precision(weight_dtype=_WEIGHT.get(q, dtype), activation_dtype=_ACTIVATION.get(q, dtype),
                     kv_cache_dtype=dtype)


def quantized(point: dict) -> bool:
    """Whether a point dict (or RunPoint) runs a quantised model."""
    value = point.get("quantization") if isinstance(point, dict) else getattr(point, "quantization", None)
    return (value or NONE) != NONE

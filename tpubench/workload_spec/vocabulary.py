"""The names a workload's fields take and the rule of its sweep axes, without the schema: what code
that describes points and results (a scenario's sweep and labels, reports, backends) needs of the
workload without importing pydantic and building its models (pydantic and the shared sections:
~55 ms of import, `python -X importtime`; sections.py builds them and re-exports these names).
"""

from __future__ import annotations

from typing import Any, Literal

Dtype = Literal["float32", "bfloat16", "float16"]
# transformers' experts implementations (the torch backend; `kernels`: a Hugging Face Hub MoE
# kernel chosen for the device, models/hub_kernels.py), then the JAX twin's formulations (the JAX
# backend): gather (one expert copy per token and slot), ragged_dot (grouped matmuls over tokens
# sorted by expert, jax.lax.ragged_dot_general) and tokamax (the same through Tokamax's
# ragged_dot kernels). Each backend refuses the other's.
TORCH_EXPERTS = ("eager", "grouped_mm", "batched_mm", "kernels")
JAX_EXPERTS = ("gather", "ragged_dot", "tokamax")
ExpertsImpl = Literal["eager", "grouped_mm", "batched_mm", "kernels", "gather", "ragged_dot", "tokamax"]
# Which loop runs a batch's decode: tpubench's own (a fenced step per token), or transformers'
# `model.generate()` as its users call it (the baseline a generate() user gets; torch only).
HF_GENERATE = "hf_generate"
DecodeLoop = Literal["tpubench", "hf_generate"]
# eager_fused / eager_sync: TorchTPU's deferred-and-fused and synchronous eager modes (TPU only,
# set in a fresh process's environment: backends/torch.py EAGER_MODE_ENVIRONMENT).
ExecutionMode = Literal["eager", "compile", "eager_fused", "eager_sync"]
MatmulPrecision = Literal["highest", "high", "medium"]
FULL_SCALE = "full"


def axis(value):
    """A sweep axis may be a scalar or a non-empty list."""
    if isinstance(value, list) and not value:
        raise ValueError("an empty list sweeps over nothing")
    return value


def as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]

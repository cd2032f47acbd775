"""Which points of a kernel A/B sweep the backend runs, and which belong to the other backend.

One workload can list every arm of a MoE kernel A/B (workloads/moe_kernels.yaml): transformers'
experts implementations and its generate() loop (torch), and the JAX twin's formulations. Each
backend measures its own arms and skips the other's, with where they are measured, so running the
workload once per backend measures every arm once. A JAX sweep that names no JAX arm runs torch's
names on its default formulation, as a plain MoE workload always has (docs/workloads.md).
"""

from __future__ import annotations

from tpubench.errors import Unavailable, UserError
from tpubench.workload_spec.sections import HF_GENERATE, JAX_EXPERTS


def arms_elsewhere(backend: str, points) -> dict[str, Unavailable]:
    """{point key: why this backend leaves it to the other} for the points of `backend`'s sweep."""
    jax_arms = [p for p in points if p.experts_implementation in JAX_EXPERTS]
    elsewhere: dict[str, Unavailable] = {}
    for p in points:
        if backend == "torch" and p in jax_arms:
            elsewhere[p.key()] = Unavailable(f"experts implementation {p.experts_implementation} is the JAX twin's: "
                                             "measured with --backend jax")
        elif backend == "jax" and p.params.get("decode_loop") == HF_GENERATE:
            elsewhere[p.key()] = Unavailable(f"decode loop {HF_GENERATE} is transformers' generate(): measured with "
                                             "--backend torch")
        elif backend == "jax" and jax_arms and p.experts_implementation and p not in jax_arms:
            elsewhere[p.key()] = Unavailable(f"experts implementation {p.experts_implementation} is transformers' "
                                             "(torch): measured with --backend torch")
    if elsewhere and len(elsewhere) == len(points):
        field = "scenario.decode_loop" if all(p.params.get("decode_loop") for p in points) else "model.experts_implementation"
        raise UserError(f"no point of this sweep runs on --backend {backend}: {next(iter(elsewhere.values()))}",
                        field=field)
    return elsewhere

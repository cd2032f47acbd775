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
    """{point key: why this backend leaves it to the other} for the points of `backend`'s sweep
    (a backend's name): a point runs here unless one of the backends its arm needs is another."""
    jax_arms = [p for p in points if p.experts_implementation in JAX_EXPERTS]
    elsewhere: dict[str, Unavailable] = {}
    for p in points:
        why = next((why for owner, why in _needs(p, jax_arms) if owner != backend), None)
        if why is not None:
            elsewhere[p.key()] = Unavailable(why)
    if elsewhere and len(elsewhere) == len(points):
        field = "scenario.decode_loop" if all(p.params.get("decode_loop") for p in points) else "model.experts_implementation"
        raise UserError(f"no point of this sweep runs on --backend {backend}: {next(iter(elsewhere.values()))}",
                        field=field)
    return elsewhere


def _needs(p, jax_arms: list) -> list[tuple[str, str]]:
    """(backend, why) for each backend the point's arm needs, in the order their reasons are told:
    a JAX twin formulation needs jax; transformers' generate() loop, and in a sweep that has JAX
    arms a named transformers experts implementation, need torch (a twin formulation in
    generate() needs both: no backend runs it)."""
    impl = p.experts_implementation
    needs = []
    if p in jax_arms:
        needs.append(("jax", f"experts implementation {impl} is the JAX twin's: measured with --backend jax"))
    if p.params.get("decode_loop") == HF_GENERATE:
        needs.append(("torch", f"decode loop {HF_GENERATE} is transformers' generate(): measured with --backend torch"))
    if jax_arms and impl and p not in jax_arms:
        needs.append(("torch", f"experts implementation {impl} is transformers' (torch): measured with --backend torch"))
    return needs

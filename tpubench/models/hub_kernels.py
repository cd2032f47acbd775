"""The torch `kernels` experts arm: a Hugging Face Hub MoE kernel, chosen for the point's device.

transformers 5 registers Hub-kernel experts implementations in its ExpertsInterface, each fetched
through the `kernels` package on first use: "sonicmoe" (kernels-community/sonic-moe, CuteDSL; CUDA
on Hopper or newer) and "deepgemm" (DeepGEMM; CUDA SM90/SM100 with an nvcc to JIT-compile, bfloat16
only). The arm takes the first one this device and dtype can load, asking transformers' own
loadability checks, so its reasons are transformers' words. When none can load, the point is
skipped with every candidate's reason (errors.Unavailable): it never runs on another
implementation under the `kernels` name.
"""

from __future__ import annotations

import importlib

from tpubench.errors import Unavailable

ARM = "kernels"
# device -> the experts implementations to try, best first. TorchTPU, TorchNeuron and torch_xla
# have no Hub MoE kernel registered in transformers (a TPU user's MoE kernel is the JAX twin's
# `tokamax`); nor does the CPU.
CANDIDATES = {"cuda": ("sonicmoe", "deepgemm")}
# Each candidate's loadability check in transformers (module, function taking raise_error=True).
_CHECKS = {"sonicmoe": ("transformers.integrations.sonicmoe", "is_sonicmoe_loadable"),
           "deepgemm": ("transformers.integrations.deepgemm", "is_deepgemm_loadable")}
_DTYPES = {"deepgemm": ("bfloat16",)}


def choose_hub_kernel(device: str, dtype: str) -> str:
    """The experts implementation the `kernels` arm runs on `device` at `dtype`; raises
    Unavailable naming why each candidate cannot."""
    candidates = CANDIDATES.get(device, ())
    if not candidates:
        raise Unavailable(f"experts implementation {ARM}: transformers registers no Hugging Face Hub MoE kernel "
                          f"for {device} (sonicmoe and deepgemm are CUDA kernels)")
    reasons = []
    for name in candidates:
        why = why_not_loadable(name, dtype)
        if why is None:
            return name
        reasons.append(f"{name}: {why}")
    raise Unavailable(f"experts implementation {ARM}: no Hub MoE kernel loads on {device}: " + "; ".join(reasons))


def why_not_loadable(name: str, dtype: str) -> str | None:
    """None when transformers says kernel `name` can load here, else its reason in one line."""
    if dtype not in _DTYPES.get(name, (dtype,)):
        return f"runs {', '.join(_DTYPES[name])} only, not {dtype}"
    module, function = _CHECKS[name]
    try:
        check = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        return f"this transformers has no {name} ({type(exc).__name__}: {exc})"
    try:
        check(raise_error=True)
    except ImportError as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def kernel_record(name: str) -> dict:
    """What the result says ran: the arm, transformers' implementation name, and the package that
    fetched it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        kernels_version = version("kernels")
    except PackageNotFoundError:
        kernels_version = None
    return {"arm": ARM, "implementation": name, "package": "kernels", "version": kernels_version}

"""Quantising a built torch model for a point's `quantization` (workload_spec/precision.py), through
torchao's `quantize_` (every nn.Linear, the LM head included; embeddings and norms stay in the model
dtype), and saying where it cannot run.

A quantisation runs only where its kernels exist: int8 weight-only and int8 dynamic on the CPU
and on CUDA; fp8 (per tensor or per row) on CUDA GPUs of compute capability 8.9 or newer (Ada,
Hopper, Blackwell); fp4 on Blackwell (10.0). Everywhere else the point is skipped with the reason:
torchao can emulate some formats on other devices, and an emulated fp8 matmul measured would be
neither fast nor what a user serves.
"""

from __future__ import annotations

import importlib.util

from tpubench.models.library_noise import quiet_library_noise
from tpubench.workload_spec.precision import NONE

# (compute capability at least, what it is called) for the formats that need a recent GPU.
_CUDA_NEEDS = {"fp8": ((8, 9), "Ada/Hopper (sm89+)"), "fp8_rowwise": ((8, 9), "Ada/Hopper (sm89+)"),
               "fp4": ((10, 0), "Blackwell (sm100+)")}
_INT8 = ("int8_weight_only", "int8_dynamic")


def refusal(quantization: str, device: str, capability: tuple[int, int] | None = None) -> str | None:
    """Why `quantization` cannot be measured on torch device `device` (None: it can). `capability`:
    the CUDA device's compute capability (asked of torch when None and device is cuda)."""
    if (quantization or NONE) == NONE:
        return None
    if importlib.util.find_spec("torchao") is None:
        return f"quantization {quantization} needs torchao: pip install 'tpubench[quant]'"
    if device not in ("cpu", "cuda"):
        return (f"quantization {quantization}: torchao's kernels run on cpu and cuda, not {device} "
                "(skipped, not emulated)")
    if quantization in _INT8:
        return None
    if device == "cpu":
        return f"quantization {quantization}: no {quantization} kernels on the CPU (skipped, not emulated)"
    needed, name = _CUDA_NEEDS[quantization]
    if capability is None:
        import torch

        capability = torch.cuda.get_device_capability()
    if tuple(capability) < needed:
        return (f"quantization {quantization} needs a {name} GPU; this one is sm{capability[0]}{capability[1]} "
                "(skipped, not emulated)")
    return None


def config_for(quantization: str):
    """torchao's config for `quantization` (not none)."""
    quiet_library_noise()
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        PerRow,
        PerTensor,
    )

    if quantization == "int8_weight_only":
        return Int8WeightOnlyConfig()
    if quantization == "int8_dynamic":
        return Int8DynamicActivationInt8WeightConfig()
    if quantization == "fp8":
        return Float8DynamicActivationFloat8WeightConfig(granularity=PerTensor())
    if quantization == "fp8_rowwise":
        return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
    if quantization == "fp4":
        from torchao.prototype.mx_formats import NVFP4InferenceConfig

        return NVFP4InferenceConfig()
    raise ValueError(f"unknown quantization {quantization!r}")


def quantize(model, quantization: str):
    """`model` with its linear layers quantised in place (returned for chaining)."""
    if (quantization or NONE) == NONE:
        return model
    from torchao.quantization import quantize_

    quantize_(model, config_for(quantization))
    return model


# Prompt tokens the gate scores at most: enough context for the distributions to mean something,
# little enough that the check stays a small fraction of a point's build.
GATE_PROMPT_TOKENS = 64


def quantize_with_gate(model, point, device) -> dict:
    """Quantise `model` (built unquantised from the point's weights) in place, scoring it against
    its unquantised self first (models/quality_gate.py): {figures..., gate, reasons}."""
    from tpubench.models.quality_gate import compare_logits, gate_prompt, quantized_logits, reference_logits, verdict

    gate = dict(point.quality)
    vocab = int(model.config.get_text_config().vocab_size)
    prompt = gate_prompt(point.measurement.get("seed", 0), min(point.input_length, GATE_PROMPT_TOKENS), vocab)
    sequence, reference = reference_logits(model, prompt, gate["steps"], device)
    quantize(model, point.quantization)
    figures = compare_logits(reference, quantized_logits(model, sequence, prompt.shape[1], device))
    return {**figures, "gate": gate, "reasons": verdict(figures, gate)}

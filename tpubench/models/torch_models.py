"""Building a transformers model for a run point: random weights from the config, or pretrained."""

from __future__ import annotations

import functools
import json
from dataclasses import replace

from tpubench.errors import UserError
from tpubench.hardware.model_shape import bytes_per_element
from tpubench.models.library_noise import quiet_library_noise

# transformers, imported where a model is built, imports torchao: its unactionable log lines go.
quiet_library_noise()


def generate_decode_note(device: str, implementations: dict) -> str | None:
    """What transformers' `generate()` would do differently here, or None.

    transformers 5.24's generate() (generation/utils.py, `_optimize_model_for_decode`) switches every
    "grouped_mm" experts implementation to "batched_mm" for its decode loop on any non-CPU device;
    tpubench's own loop keeps the point's implementation, so its decode numbers are not what a
    generate() user gets there."""
    if device == "cpu" or "grouped_mm" not in implementations.values():
        return None
    return (f"decode used experts implementation grouped_mm; transformers' generate() would switch it to "
            f"batched_mm for decode on {device} (generation/utils.py _optimize_model_for_decode), so "
            f"generate() users get batched_mm's decode speed here")


def hf_config(point):
    """The transformers config object for the point's family and resolved config values."""
    from transformers import CONFIG_MAPPING

    try:
        config_class = CONFIG_MAPPING[point.family]
    except KeyError:
        raise UserError(f"unknown model family '{point.family}' (not a transformers model_type)",
                        field="model.family") from None
    try:
        return config_class(**point.model_config)
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises about a config is bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserError(f"transformers rejected the config ({type(exc).__name__}): {first}",
                        field="model.config") from None


@functools.lru_cache(maxsize=32)
def _parameter_count(family: str, config_json: str) -> int:
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    config = CONFIG_MAPPING[family](**json.loads(config_json))
    # The meta device allocates nothing: an exact count for any architecture, even 30B, in seconds.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def parameter_count(point) -> int:
    hf_config(point)  # turn a bad family or config into a UserError first
    return _parameter_count(point.family, json.dumps(point.model_config, sort_keys=True))


def weight_bytes(point) -> int:
    return parameter_count(point) * bytes_per_element(point.dtype)


def full_config(point) -> dict:
    """Every config value transformers uses for this point, defaults included (for the roofline)."""
    return hf_config(point).to_dict()


def estimate_bytes(point) -> int:
    """Weights + static KV cache + a margin for prefill activations and last-position logits, per
    chip of the point's parallel layout.

    A rough upper estimate, used only to refuse runs that cannot fit before spending minutes
    building them.
    """
    from tpubench.hardware.counts import kv_cache_bytes
    from tpubench.hardware.model_shape import ModelShape

    shape = ModelShape.from_config(point.family, full_config(point))
    b, length = point.batch_size, point.input_length + point.output_length
    elt = bytes_per_element(point.dtype)
    kv = kv_cache_bytes(shape, b, length, elt)
    # Per chip of a sharded layout: both layouts split every layer's matmuls (expert parallel splits
    # the experts and runs attention tensor-parallel) and the KV heads over the world; embeddings,
    # small beside them, are counted as split too.
    weights = weight_bytes(point) // point.world_size
    kv //= point.world_size
    # Prefill keeps a few hidden-sized tensors per token alive, plus the MLP's intermediate
    # activations (its weights per token over the hidden size: about 3x the MLP width).
    mlp = max((layer.mlp_matmul_params + layer.top_k * layer.params_per_expert for layer in shape.layers),
              default=0) // max(shape.hidden_size, 1)
    activations = b * point.input_length * (8 * shape.hidden_size + mlp) * elt
    logits = 2 * b * shape.vocab_size * 4
    return int(weights + kv + activations + logits)


def build_model(point, init_device, device: str | None = None):
    """The model in eval mode with the point's dtype and experts implementation, for `device`
    (the backend's device name; default: where it is built)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, point.dtype)
    if point.weights == "pretrained":
        if not point.hub_id:
            raise UserError("weights: pretrained needs model.hub_id", field="model.hub_id")
        model = AutoModelForCausalLM.from_pretrained(point.hub_id, dtype=dtype,
                                                     trust_remote_code=point.trust_remote_code)
        model = model.to(init_device)
    else:
        config = hf_config(point)
        torch.manual_seed(point.measurement.get("seed", 0))
        with torch.device(init_device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return _ready(model, point, device or str(init_device))


def save_host_checkpoint(point, folder) -> None:
    """The point's random weights, made on the host from the seed (as a single-chip build makes
    them), saved for the ranks of a world to load sharded: numerics compare across layouts."""
    from transformers.utils import logging as hf_logging

    # Weights only: the experts implementation is the ranks' to set, for their own device.
    model = build_model(replace(point, experts_implementation=None), "cpu")
    hf_logging.disable_progress_bar()   # tpubench's own progress display is showing
    model.save_pretrained(folder)


def load_sharded(point, checkpoint: str):
    """This rank's shard of the model: tensor parallel through the model's own tp_plan, expert
    parallel through transformers' DistributedConfig (experts split over the ranks)."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict = {"tp_plan": "auto"}
    if point.expert_parallel > 1:
        from transformers.distributed import DistributedConfig

        # Each of the N ranks holds 1/N of the experts, and attention is tensor-parallel over the
        # same ranks (transformers 5.24 refuses an empty tp_plan with tp_size > 1, and
        # enable_expert_parallel=True alone leaves ep_size at 1: nothing would be split).
        n = point.expert_parallel
        kwargs = {"distributed_config": DistributedConfig(tp_size=n, ep_size=n)}
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()   # one bar per rank would only clutter tpubench's own display
    source = point.hub_id if point.weights == "pretrained" else checkpoint
    model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, point.dtype),
                                                 trust_remote_code=point.trust_remote_code, **kwargs)
    return _ready(model, point, next(model.parameters()).device.type)


def _ready(model, point, device: str):
    from tpubench.workload_spec.sections import JAX_EXPERTS

    if point.experts_implementation in JAX_EXPERTS:
        raise UserError(f"experts implementation {point.experts_implementation} is the JAX twin's (--backend jax); "
                        "torch runs eager, grouped_mm, batched_mm or kernels", field="model.experts_implementation")
    if point.experts_implementation:
        if not getattr(model, "_can_set_experts_implementation", lambda: False)():
            raise UserError(f"{point.family} has no switchable experts implementation",
                            field="model.experts_implementation")
        model.set_experts_implementation(experts_to_set(point, device))
    return model.eval()


def experts_to_set(point, device: str) -> str:
    """transformers' experts implementation for the point: its own name, or for the `kernels` arm
    the Hub kernel chosen for the device (models/hub_kernels.py; Unavailable when none loads)."""
    from tpubench.models.hub_kernels import ARM, choose_hub_kernel

    if point.experts_implementation == ARM:
        return choose_hub_kernel(device, point.dtype)
    return point.experts_implementation

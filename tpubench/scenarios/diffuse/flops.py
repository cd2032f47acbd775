"""FLOPs of one denoising step of scenario `diffuse`, for MFU per step (docs/definitions.md#diffusion).

A step is one forward of the denoiser (the Flux or SD3 transformer, the SDXL UNet) on the step's
batch: images x 2 under classifier-free guidance (SD3, SDXL batch the two halves in one call; Flux's
guidance is an embedding, one half). The count is torch's FlopCounterMode over that forward at the
point's shapes, on the inputs the first step really had: the matmuls, convolutions and attention
products of the module built from the config, 2 FLOPs per multiply-add; elementwise work (norms,
activations) is not counted, as in every MFU.
"""

from __future__ import annotations


def denoiser_flops(module, inputs) -> float | None:
    """FLOPs of one forward (`module`, the uncompiled forward) on `inputs` ((args, kwargs) of its first call), or None
    when no inputs were captured."""
    if inputs is None:
        return None
    from torch.utils.flop_counter import FlopCounterMode

    args, kwargs = inputs
    counter = FlopCounterMode(display=False)
    with counter:
        module(*args, **kwargs)
    return float(counter.get_total_flops())

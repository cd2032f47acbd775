"""The numerics fingerprint of a diffusion point: the first step's noise prediction and the final
latents of the first call, each as a fixed sample of values with its spread, so that two results
(backends, devices, dtypes) can be compared by `tpubench compare --numerics`
(measure/numerics.py compares `tensors` fingerprints with dtype-aware tolerances)."""

from __future__ import annotations

SAMPLE = 64   # values kept per tensor, at positions drawn from a fixed seed


def tensor_fingerprint(t) -> dict:
    """{shape, sample_ids, sample, std, mean, abs_max} of a float tensor on the host."""
    import numpy as np

    flat = t.reshape(-1).numpy().astype(np.float64)
    ids = np.sort(np.random.default_rng(0).choice(flat.size, size=min(SAMPLE, flat.size), replace=False))
    finite = flat[np.isfinite(flat)]
    return {"shape": list(t.shape), "sample_ids": ids.tolist(), "sample": flat[ids].tolist(),
            "std": float(finite.std()) if finite.size else float("nan"),
            "mean": float(finite.mean()) if finite.size else float("nan"),
            "abs_max": float(np.abs(finite).max()) if finite.size else float("nan"),
            "nonfinite": int(flat.size - finite.size)}


def fingerprint(captured: dict, point) -> dict:
    """The result's `numerics`: the tensors captured in the first call (stages.StagedPipeline)."""
    tensors = {name: tensor_fingerprint(captured[key]) for name, key in
               (("first_step_noise_pred", "noise_pred"), ("final_latents", "latents")) if key in captured}
    # Random weights are drawn on the host from the seed and pretrained ones read from files:
    # the same on every device.
    return {"tensors": tensors, "weights_identical_across_devices": True, "dtype": point.dtype} if tensors else {}

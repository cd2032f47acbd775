"""The torch `kernels` experts arm (models/hub_kernels.py): a Hub MoE kernel chosen for the device,
or a skipped point with every candidate's reason, never another implementation under its name."""

from __future__ import annotations

import pytest

from tpubench.errors import Unavailable
from tpubench.models import hub_kernels


def test_no_device_but_cuda_has_a_hub_moe_kernel():
    for device in ("cpu", "tpu", "neuron", "xla"):
        with pytest.raises(Unavailable, match=f"no Hugging Face Hub MoE kernel for {device}"):
            hub_kernels.choose_hub_kernel(device, "bfloat16")


def test_the_first_loadable_candidate_wins_and_reasons_are_transformers_own(monkeypatch):
    verdicts = {"sonicmoe": "sonic-moe requires a Hopper (SM90) or newer GPU", "deepgemm": None}

    def why(name, dtype):
        if name == "deepgemm" and dtype != "bfloat16":
            return "runs bfloat16 only, not float32"
        return verdicts[name]

    monkeypatch.setattr(hub_kernels, "why_not_loadable", why)
    assert hub_kernels.choose_hub_kernel("cuda", "bfloat16") == "deepgemm"
    verdicts["sonicmoe"] = None
    assert hub_kernels.choose_hub_kernel("cuda", "bfloat16") == "sonicmoe"
    verdicts["sonicmoe"] = "sonic-moe kernel requires CUDA, but CUDA is not available."
    with pytest.raises(Unavailable) as exc:
        hub_kernels.choose_hub_kernel("cuda", "float32")
    assert str(exc.value) == ("experts implementation kernels: no Hub MoE kernel loads on cuda: sonicmoe: sonic-moe "
                              "kernel requires CUDA, but CUDA is not available.; deepgemm: runs bfloat16 only, "
                              "not float32")


def test_loadability_is_asked_of_the_installed_transformers():
    """On this CPU-only machine transformers itself says why sonicmoe and deepgemm cannot load."""
    for name in ("sonicmoe", "deepgemm"):
        why = hub_kernels.why_not_loadable(name, "bfloat16")
        assert why and ("CUDA" in why or "kernels" in why), why
        assert "\n" not in why
    assert hub_kernels.why_not_loadable("deepgemm", "float32") == "runs bfloat16 only, not float32"


def test_the_result_names_the_kernel_that_ran():
    record = hub_kernels.kernel_record("sonicmoe")
    assert record["arm"] == "kernels" and record["implementation"] == "sonicmoe" and record["package"] == "kernels"

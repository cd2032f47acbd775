"""Which serving engines offer an fp8 KV cache on which chips, from their own documentation and
code (read 2026-12): an estimate at `kv_fp8` on a chip no engine runs one on is refused with the
reason, rather than made as if it could.

- NVIDIA Hopper, Blackwell, RTX PRO (Blackwell) and Ada (L4, L40S): vLLM (`--kv-cache-dtype fp8`,
  docs.vllm.ai features/quantization/quantized_kvcache), SGLang (`--kv-cache-dtype fp8_e4m3`,
  docs.sglang.io advanced_features/quantized_kv_cache) and TensorRT-LLM (FP8 KV cache, sm89+).
- NVIDIA Ampere (A100): vLLM only, converting in software (its Triton attention backend lists fp8
  among its KV-cache dtypes, docs.vllm.ai v0.26.0 API vllm.v1.attention.backends.triton_attn;
  github.com/vllm-project/vllm pull 2279 measured it on A100); Ampere has no fp8 units.
- AMD Instinct: vLLM on ROCm and SGLang (the same flags; vLLM's page names MI300 among the chips
  with native fp8 conversion).
- Google TPU v5e, v5p, v6e, TPU7x: vLLM TPU (tpu-inference): its ragged paged attention kernel stores
  packed 8-bit KV pages on TPU v5 to v8 (tpu_inference/kernels/ragged_paged_attention/v3/kernel.py,
  get_tpu_version() 5-8, NotImplementedError otherwise) and its CI serves with
  `"kv-cache-dtype": "fp8"` on v6e and v7x (.buildkite/benchmark/cases/ci/
  Qwen3-4B-dataset_custom-inlen_4096-outlen_1024.json, github.com/vllm-project/tpu-inference @
  b8692ff01fa1). TPU v4: none (that kernel refuses TPU v4).
- AWS Trainium, Trainium2, Inferentia2: NxD Inference (`NeuronConfig(kv_cache_quant=True)`: the
  cache in float8_e4m3fn, dequantised on read; aws-neuron-sdk libraries/nxd-inference/
  developer_guides/feature-guide.rst, "KV Cache Quantization") and vLLM Neuron on Trainium2
  (`kv_cache_dtype="fp8"`, Llama 3 models only as of 2026-06-23: aws-neuron-sdk, vLLM Neuron's design
  page kv-cache-quantization.md).
"""

from __future__ import annotations

from tpubench.estimate.chips import chip_family

# Chip family (estimate.chips) -> the engines that offer an fp8 KV cache on it.
_FP8_KV_ENGINES = {
    "NVIDIA Hopper": "vLLM, SGLang, TensorRT-LLM",
    "NVIDIA Blackwell": "vLLM, SGLang, TensorRT-LLM",
    "NVIDIA RTX PRO (Blackwell, GDDR7)": "vLLM, SGLang, TensorRT-LLM",
    "NVIDIA Ada/Ampere PCIe": "vLLM, SGLang, TensorRT-LLM",
    "NVIDIA Ampere": "vLLM (converted in software)",
    "AMD Instinct": "vLLM, SGLang",
    "Google TPU": "vLLM TPU (tpu-inference)",
    "AWS Trainium/Inferentia": "NxD Inference, vLLM Neuron (Trainium2, Llama 3)",
}
# Chips of a family above that no engine runs one on, and why.
_NOT_ON = {
    "TPU v4": "vLLM TPU's attention kernel runs on TPU v5 and later",
}


def quantised_cache(kv_bytes: float) -> bool:
    """Whether a cache of `kv_bytes` per element is held in fewer than 16 bits (an fp8 cache)."""
    return kv_bytes < 2.0


def fp8_kv_engines(accelerator: str) -> str | None:
    """The engines that offer an fp8 KV cache on `accelerator`; None when none does."""
    if accelerator in _NOT_ON:
        return None
    return _FP8_KV_ENGINES.get(chip_family(accelerator) or "")


def fp8_kv_refusal(accelerator: str) -> str | None:
    """Why an fp8 KV cache cannot be estimated on `accelerator` (one line), or None when it can."""
    if fp8_kv_engines(accelerator) is not None:
        return None
    why = _NOT_ON.get(accelerator, "no serving engine tpubench knows of offers one there")
    return f"no fp8 KV cache on {accelerator}: {why}"


__all__ = ["fp8_kv_engines", "fp8_kv_refusal", "quantised_cache"]

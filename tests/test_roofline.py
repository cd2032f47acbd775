"""Roofline arithmetic on tiny configs computed by hand, cross-checked against real models."""

from __future__ import annotations

import math

import pytest

from tpubench.errors import UserError
from tpubench.hardware.counts import (
    decode_bytes_breakdown,
    decode_bytes_per_step,
    decode_flops_per_step,
    expected_distinct_experts,
    flops_per_token,
    kv_cache_bytes,
    prefill_flops,
)
from tpubench.hardware.model_shape import ModelShape, bytes_per_element
from tpubench.hardware.roofline import efficiency_for_run, mbu, mfu

# Tiny Qwen3-MoE: hidden 8, 1 layer, 2 heads / 1 kv head, head_dim 4, 4 experts top-2,
# moe_intermediate 6, vocab 10, untied.
#   q 8x8=64, k 8x4=32, v 8x4=32, o 8x8=64            -> attention matmuls 192
#   q_norm 4 + k_norm 4 + input_ln 8 + post_attn_ln 8 -> other 24
#   router 8x4                                        -> 32
#   one expert: gate_up 2*6*8=96 + down 8*6=48        -> 144; 4 experts 576
#   layer 192+24+32+576 = 824; embed 80, lm_head 80, final norm 8 -> total 992
#   active (matmuls one token touches, lm_head in, embedding out): 192+32+2*144+80 = 592
TINY_MOE = {
    "model_type": "qwen3_moe", "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
    "intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 6, "vocab_size": 10, "tie_word_embeddings": False,
}

# Tiny dense Qwen3: hidden 8, 2 layers, 2 heads / 1 kv head, head_dim 4, intermediate 12,
# vocab 10, tied embeddings.
#   per layer: attention 192 + norms 24 + MLP 3*8*12=288 -> 504; two layers 1008
#   embed 80 (the lm_head is the same tensor) + final norm 8 -> total 1096
#   active: 2*(192+288) + lm_head 80 = 1040
TINY_DENSE = {
    "model_type": "qwen3", "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
    "intermediate_size": 12, "vocab_size": 10, "tie_word_embeddings": True,
}


def test_tiny_moe_params_and_flops():
    shape = ModelShape.from_config("qwen3_moe", TINY_MOE)
    assert shape.total_params == 992
    assert shape.active_params == 592
    assert (shape.n_experts, shape.top_k) == (4, 2)
    # 2*592 + attention 4 * 2 heads * 4 head_dim * 5 tokens = 1184 + 160
    assert flops_per_token(shape, 5) == 1344
    assert decode_flops_per_step(shape, 4, 5) == 4 * 1344
    # Prefill, batch 2, 3 tokens: per position 2*512 (all matmuls but the lm_head) -> 3072;
    # attention over 1+2+3 = 6 keys -> 4*2*4*6 = 192; lm_head at the last position 2*80 = 160.
    assert prefill_flops(shape, 2, 3) == 2 * (3072 + 192 + 160)
    # Logits at every position add 2 more lm_head passes: +2*2*80 per sequence.
    assert prefill_flops(shape, 2, 3, logits_all_positions=True) == 2 * (3424 + 320)


def test_expected_distinct_experts():
    assert expected_distinct_experts(4, 2, 1) == 2            # one token: exactly k
    assert expected_distinct_experts(4, 2, 4) == 4 * (1 - 0.5**4)  # 3.75
    assert expected_distinct_experts(128, 8, 1) == pytest.approx(8)
    assert expected_distinct_experts(128, 8, 10_000) == pytest.approx(128)
    assert expected_distinct_experts(0, 0, 8) == 0


def test_tiny_moe_decode_bytes():
    shape = ModelShape.from_config("qwen3_moe", TINY_MOE)
    # fp32, context 5. Non-expert weights: 192 + 24 + 32 + lm_head 80 + final norm 8 = 336 -> 1344 B
    # Batch 1: 2 distinct experts * 144 * 4 = 1152; KV 2*1*4*5*1*4 = 160; embedding row 8*4 = 32
    assert decode_bytes_breakdown(shape, 1, 5, "float32") == {
        "weights": 1344, "experts": 1152, "kv_cache": 160, "embeddings": 32}
    assert decode_bytes_per_step(shape, 1, 5, 4) == 2688
    # Batch 4: 3.75 experts * 144 * 4 = 2160; KV 2*1*4*5*4*4 = 640; rows 4*8*4 = 128
    assert decode_bytes_per_step(shape, 4, 5, "float32") == 1344 + 2160 + 640 + 128
    # A measured count replaces the formula: 3 experts -> 1728
    assert decode_bytes_per_step(shape, 4, 5, 4, distinct_experts=3) == 1344 + 1728 + 640 + 128
    # A bf16 KV cache under fp32 weights halves only the KV term.
    assert decode_bytes_per_step(shape, 4, 5, 4, kv_dtype_bytes="bfloat16") == 4272 - 320
    with pytest.raises(ValueError):
        decode_bytes_per_step(shape, 4, 5, 4, distinct_experts=5)
    # Cache held (not read) at context 5, bf16: 2*1*4*5*4*2
    assert kv_cache_bytes(shape, 4, 5, "bf16") == 320


def test_tiny_dense_by_hand():
    shape = ModelShape.from_config("qwen3", TINY_DENSE)
    assert shape.total_params == 1096
    assert shape.active_params == 1040
    assert shape.moe_layers == ()
    # 2*1040 + 2 layers * 160 attention
    assert flops_per_token(shape, 5) == 2400
    # bf16, batch 1, context 5: all 1096 weights read once (tied table read as lm_head) -> 2192;
    # KV 2 layers * 2*1*4*5*2 = 160; embedding row 8*2 = 16
    assert decode_bytes_per_step(shape, 1, 5, "bfloat16") == 2192 + 160 + 16


def test_sliding_window_layers():
    # Layer 1 becomes sliding with a 2-token window (layers >= max_window_layers slide).
    cfg = dict(TINY_DENSE, use_sliding_window=True, sliding_window=2, max_window_layers=1)
    shape = ModelShape.from_config("qwen3", cfg)
    assert [layer.window for layer in shape.layers] == [None, 2]
    # Attention at context 5: full 4*2*4*5 = 160, sliding 4*2*4*2 = 64
    assert flops_per_token(shape, 5) == 2 * 1040 + 160 + 64
    # Prefill of 3: full layer keys 1+2+3 = 6, sliding min(p, 2) -> 1+2+2 = 5;
    # matmuls 2*(2*480)*3 = 5760, lm_head once 160.
    assert prefill_flops(shape, 1, 3) == 5760 + 4 * 2 * 4 * (6 + 5) + 160
    # KV reads at context 5, bf16: full 2*4*5*2 = 80, sliding 2*4*2*2 = 32
    assert decode_bytes_breakdown(shape, 1, 5, 2)["kv_cache"] == 80 + 32
    # A config.json sliding_window that use_sliding_window switches off is ignored.
    off = ModelShape.from_config("qwen3", dict(TINY_DENSE, sliding_window=2, use_sliding_window=False))
    assert [layer.window for layer in off.layers] == [None, None]


def test_mfu_mbu_and_efficiency_for_run():
    assert mfu(5e11, 1e12) == 0.5
    assert mbu(2e9, 8e9) == 0.25
    assert mfu(1.0, None) is None
    # fp32, batch 1, I=3, O=3. Prefill 3424 FLOPs (above) in 3.424 us = 1e9 FLOP/s; peak 2e9.
    # Decode steps attend to 4 and 5 keys (mean 4.5): bytes 1344 + 1152 + KV 2*4*4.5*4=144 + 32
    # = 2672 in 2.672 us = 1e9 B/s of 4e9; FLOPs 1184 + 4*2*4*4.5 = 1328 -> 1328/5344 of peak.
    r = efficiency_for_run("qwen3_moe", TINY_MOE, "float32", 1, 3, 3, 3.424e-6, 2.672e-6,
                           2e9, 4e9)
    assert r["prefill_flops"] == 3424
    assert r["prefill_achieved_flops_per_s"] == pytest.approx(1e9)
    assert r["prefill_mfu"] == pytest.approx(0.5)
    assert r["decode_bytes_per_step"] == pytest.approx(2672)
    assert r["decode_achieved_bytes_per_s"] == pytest.approx(1e9)
    assert r["decode_mbu"] == pytest.approx(0.25)
    assert r["decode_flops_per_step"] == pytest.approx(1328)
    assert r["decode_mfu"] == pytest.approx(1328 / 5344)
    assert r["expected_distinct_experts"] == 2
    assert r["exceeds_peak"] is False
    # A TTFT 1000x too short implies 500x the chip's peak: a timing bug, flagged.
    fast = efficiency_for_run("qwen3_moe", TINY_MOE, "float32", 1, 3, 3, 3.424e-9, 2.672e-6,
                              2e9, 4e9)
    assert fast["exceeds_peak"] is True
    # One output token: no decode phase; unknown peaks give None, never a false flag.
    single = efficiency_for_run("qwen3", TINY_DENSE, "bf16", 2, 3, 1, 1e-3, None, None, None)
    assert single["decode_bytes_per_step"] is None and single["prefill_mfu"] is None
    assert single["expected_distinct_experts"] is None and single["exceeds_peak"] is False


def test_dtype_bytes():
    assert bytes_per_element("float32") == 4
    assert bytes_per_element("torch.bfloat16") == 2
    assert bytes_per_element("float16") == 2
    with pytest.raises(UserError):
        bytes_per_element("float13")


def test_published_sizes():
    # Qwen3-30B-A3B: "30.5B total, 3.3B activated" (the activated count includes embeddings).
    qwen = ModelShape.from_config("qwen3_moe", {
        "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
        "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
        "vocab_size": 151936, "tie_word_embeddings": False})
    assert qwen.total_params == pytest.approx(30.5e9, rel=0.005)
    assert qwen.active_params + qwen.embedding_params == pytest.approx(3.3e9, rel=0.02)
    # Gemma 4 26B-A4B: "25.2B total, 3.8B active" (as config.json spells it, global keys raw).
    gemma = ModelShape.from_config(None, {"model_type": "gemma4", "text_config": {
        "model_type": "gemma4_text", "vocab_size": 262144, "hidden_size": 2816,
        "intermediate_size": 2112, "num_hidden_layers": 30, "num_attention_heads": 16,
        "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256,
        "global_head_dim": 512, "attention_k_eq_v": True, "enable_moe_block": True,
        "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
        "sliding_window": 1024, "hidden_size_per_layer_input": 0}})
    assert gemma.total_params == pytest.approx(25.2e9, rel=0.005)
    assert gemma.active_params == pytest.approx(3.8e9, rel=0.02)
    full = [layer for layer in gemma.layers if layer.window is None]
    assert len(full) == 5 and {(l.head_dim, l.n_kv_heads) for l in full} == {(512, 2)}


# --- cross-check against transformers ----------------------------------------------------------


def _real_counts(model, top_k_over_experts: float) -> tuple[int, float]:
    """(sum of numel, matmul weights one token touches) read off a built model."""
    total = sum(p.numel() for p in model.parameters())  # tied tensors once
    active = 0.0
    for name, p in model.named_parameters(remove_duplicate=False):
        if "embed_tokens" in name:
            continue  # lookups, not matmuls (also Gemma 4's per-layer table)
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            active += p.numel() * top_k_over_experts
        elif p.dim() == 2:
            active += p.numel()  # includes a tied lm_head, listed here under its own name
    return total, active


def test_param_counts_match_transformers():
    import transformers as tf

    gemma_kwargs = dict(
        vocab_size=10, hidden_size=8, intermediate_size=12, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=2, head_dim=4, global_head_dim=6,
        num_global_key_value_heads=1, attention_k_eq_v=True, enable_moe_block=True,
        num_experts=4, top_k_experts=2, moe_intermediate_size=6, sliding_window=3,
        layer_types=["sliding_attention", "full_attention"] * 2, hidden_size_per_layer_input=2,
        vocab_size_per_layer_input=7, num_kv_shared_layers=2, use_double_wide_mlp=True,
        attention_bias=True)
    cases = [
        ("qwen3_moe", tf.Qwen3MoeConfig(**{k: v for k, v in TINY_MOE.items() if k != "model_type"}),
         tf.Qwen3MoeForCausalLM, 0.5),
        # a dense layer among sparse ones, biases
        ("qwen3_moe", tf.Qwen3MoeConfig(
            hidden_size=8, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
            head_dim=4, intermediate_size=12, num_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=6, vocab_size=10, mlp_only_layers=[2], attention_bias=True),
         tf.Qwen3MoeForCausalLM, 0.5),
        ("qwen3", tf.Qwen3Config(**{k: v for k, v in TINY_DENSE.items() if k != "model_type"}),
         tf.Qwen3ForCausalLM, 0.0),
        ("qwen3", tf.Qwen3Config(**{**{k: v for k, v in TINY_DENSE.items() if k != "model_type"},
                                    "attention_bias": True, "tie_word_embeddings": False}),
         tf.Qwen3ForCausalLM, 0.0),
        ("gemma4_text", tf.Gemma4TextConfig(**gemma_kwargs), tf.Gemma4ForCausalLM, 0.5),
        ("gemma4_text", tf.Gemma4TextConfig(
            vocab_size=10, hidden_size=8, intermediate_size=12, num_hidden_layers=6,
            num_attention_heads=2, num_key_value_heads=1, head_dim=4, global_head_dim=8,
            sliding_window=3, hidden_size_per_layer_input=0, tie_word_embeddings=False),
         tf.Gemma4ForCausalLM, 0.0),
        # the llama-like fallback: biases everywhere; a uniform MoE (Mixtral)
        ("llama", tf.LlamaConfig(vocab_size=10, hidden_size=8, intermediate_size=12,
                                 num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                 attention_bias=True, mlp_bias=True),
         tf.LlamaForCausalLM, 0.0),
        ("mixtral", tf.MixtralConfig(vocab_size=10, hidden_size=8, intermediate_size=12,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     num_key_value_heads=1, num_local_experts=4,
                                     num_experts_per_tok=2),
         tf.MixtralForCausalLM, 0.5),
    ]
    for family, config, model_cls, k_over_e in cases:
        model = model_cls(config)
        total, active = _real_counts(model, k_over_e)
        shape = ModelShape.from_config(family, config.to_dict())
        assert (shape.total_params, shape.active_params) == (total, active), family
    # The raw config.json spelling (global_head_dim / num_global_key_value_heads, no
    # per_layer_config) reads the same as to_dict().
    raw = ModelShape.from_config("gemma4_text", gemma_kwargs)
    assert raw == ModelShape.from_config("gemma4_text", tf.Gemma4TextConfig(**gemma_kwargs).to_dict())


@pytest.mark.slow   # times the host's matmuls and memory for about a second
def test_host_probe_positive_and_cached():
    from tpubench.hardware.hostprobe import probe_host

    first = probe_host()
    for key in ("cpu_peak_fp32_flops", "cpu_peak_bf16_flops", "cpu_mem_bandwidth_bytes_per_s",
                "probe_seconds"):
        assert math.isfinite(first[key]) and first[key] > 0, key
    assert first["threads"] >= 1
    assert probe_host() == first  # cached per process


class _ClockedBlas:
    """A fake torch whose n x n matmul takes exactly 2 n^3 / FLOPS seconds on a fake clock: the
    probe's time budget is then checked by its own arithmetic, not by a busy host's wall clock."""

    FLOPS = 2e9

    def __init__(self):
        self.t = 0.0
        self.sizes: list[int] = []

    def perf_counter(self) -> float:
        return self.t

    def randn(self, n, m):
        return type("M", (), {"n": n, "to": lambda self, dtype: self})()

    def matmul(self, a, b):
        self.t += 2 * a.n ** 3 / self.FLOPS
        self.sizes.append(a.n)

    def get_num_threads(self):
        return 2

    def set_num_threads(self, n):
        pass


def test_host_probe_keeps_to_its_time_budget(monkeypatch):
    from tpubench.hardware import hostprobe

    blas = _ClockedBlas()
    monkeypatch.setattr(hostprobe.time, "perf_counter", blas.perf_counter)
    rate, n = hostprobe._gemm_flops(blas, "fp32", budget_s=0.5)
    # 256^3 takes 16.8 ms (warm-up + >= 0.1 s of repetitions), 512^3 134 ms (its warm-up + 3 reps
    # would overrun 0.5 s, so the repetitions stop at the deadline), 1024^3 would need 2.1 s: not tried.
    assert rate == pytest.approx(blas.FLOPS) and sorted(set(blas.sizes)) == [256, 512]
    assert 0.5 <= blas.t <= 0.5 + 2 * 512 ** 3 / blas.FLOPS     # the budget, overrun by one repetition at most
    blas.t, blas.sizes = 0.0, []
    hostprobe._gemm_best(blas, "fp32", budget_s=0.25)           # two thread settings, half the budget each
    assert sorted(set(blas.sizes)) == [256] and blas.t <= 0.25 + 2 * 2 * 256 ** 3 / blas.FLOPS


# --- multi-chip: per-chip roofline and bytes between chips (docs/multi-chip.md) -------------------------


def test_per_chip_decode_bytes_by_hand():
    shape = ModelShape.from_config("qwen3_moe", TINY_MOE)
    # fp32, batch 1, context 5, 2 chips. Split over the chips: attention 192 + lm_head 80 = 272
    # -> 136 each; replicated: router 32 + norms 24 + final norm 8 = 64 -> weights (136+64)*4 = 800.
    # Experts 2 distinct * 144 * 4 = 1152 -> 576 per chip; KV 160 -> 80; embedding row 32 as is.
    assert decode_bytes_breakdown(shape, 1, 5, "float32", world_size=2) == {
        "weights": 800, "experts": 576, "kv_cache": 80, "embeddings": 32}
    # One chip: the single-chip figures, unchanged.
    assert decode_bytes_breakdown(shape, 1, 5, "float32", world_size=1) == \
        decode_bytes_breakdown(shape, 1, 5, "float32")


def test_interconnect_bytes_tensor_parallel_by_hand():
    from tpubench.hardware.counts import (
        decode_interconnect_bytes_per_step,
        interconnect_bytes_per_forward,
        ring_all_gather_send_bytes,
        ring_all_reduce_send_bytes,
    )

    assert ring_all_reduce_send_bytes(100, 4) == 150      # 2 * 3/4 * 100
    assert ring_all_gather_send_bytes(100, 4) == 75       # 3/4 * 100
    moe = ModelShape.from_config("qwen3_moe", TINY_MOE)
    # Batch 4, fp32: the hidden state is 4*8*4 = 128 B. All-reduces: embedding 1 + o_proj 1 +
    # experts 1 = 3, each sends 2*(1/2)*128 = 128 on 2 chips -> 384; logits 4*10*4 = 160 B
    # gathered -> 80 sent. 464 per chip per step.
    assert interconnect_bytes_per_forward(moe, 4, 4, 2, "float32") == {
        "all_reduce": 384, "all_gather": 80, "all_to_all": 0}
    assert decode_interconnect_bytes_per_step(moe, 4, 2, "float32") == 464
    # 4 chips: 3 * 2*(3/4)*128 = 576 + 3/4*160 = 120.
    assert decode_interconnect_bytes_per_step(moe, 4, 4, 4) == 696
    # One chip sends nothing.
    assert decode_interconnect_bytes_per_step(moe, 4, 1, 4) == 0
    # Expert parallel as transformers runs it at inference (all_reduce): the same collectives.
    assert decode_interconnect_bytes_per_step(moe, 4, 2, 4, expert_parallel=True) == 464
    # Dense Qwen3, 2 layers, bf16, batch 1: hidden 1*8*2 = 16 B; all-reduces 1 + 2*(o_proj + down)
    # = 5 -> 5*16 = 80; logits 1*10*2 = 20 -> 10.
    dense = ModelShape.from_config("qwen3", TINY_DENSE)
    assert decode_interconnect_bytes_per_step(dense, 1, 2, "bfloat16") == 90


def test_interconnect_bytes_gemma4_dense_mlp_beside_experts():
    from tpubench.hardware.counts import decode_interconnect_bytes_per_step

    # Gemma 4 runs a dense MLP and the MoE block in every layer: 3 all-reduces per layer
    # (o_proj, dense down, experts) + the embedding's = 1 + 4*3 = 13. fp32, batch 1, 2 chips:
    # 13 * (2*(1/2)*32) = 416, logits 10*4 = 40 -> 20.
    shape = ModelShape.from_config("gemma4_text", dict(
        vocab_size=10, hidden_size=8, intermediate_size=12, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=2, head_dim=4, global_head_dim=6,
        num_global_key_value_heads=1, attention_k_eq_v=True, enable_moe_block=True,
        num_experts=4, top_k_experts=2, moe_intermediate_size=6, sliding_window=3,
        layer_types=["sliding_attention", "full_attention"] * 2, hidden_size_per_layer_input=0))
    assert decode_interconnect_bytes_per_step(shape, 1, 2, "float32") == 436


def test_interconnect_bytes_expert_parallel_all_to_all_by_hand():
    from tpubench.hardware.counts import interconnect_bytes_per_forward

    moe = ModelShape.from_config("qwen3_moe", TINY_MOE)
    # Batch 4, fp32, 2 chips, all_to_all: all-reduces embedding + o_proj = 2 -> 256; per MoE layer
    # counts 1/2 * 4 experts * 8 B = 16, dispatch and combine 2 * (4/2 tokens * k=2 * 1/2 * 8*4 B)
    # = 128, output all-gather 1/2 * 128 = 64 beside the logits' 80.
    assert interconnect_bytes_per_forward(moe, 4, 4, 2, 4, expert_parallel=True,
                                          ep_implementation="all_to_all") == {
        "all_reduce": 256, "all_gather": 144, "all_to_all": 144}
    with pytest.raises(ValueError):
        interconnect_bytes_per_forward(moe, 4, 4, 2, 4, ep_implementation="nccl")


def test_efficiency_for_run_on_two_chips_by_hand():
    # The single-chip case of test_mfu_mbu_and_efficiency_for_run, on 2 chips, 1 GB/s to send.
    r = efficiency_for_run("qwen3_moe", TINY_MOE, "float32", 1, 3, 3, 3.424e-6, 2.672e-6,
                           2e9, 4e9, world_size=2, interconnect_send_bytes_per_s=1e9)
    assert r["world_size"] == 2
    # Prefill: 3424 FLOPs in 3.424 us = 1e9 FLOP/s over both chips, 5e8 per chip of 2e9.
    assert r["prefill_achieved_flops_per_s"] == pytest.approx(1e9)
    assert r["prefill_achieved_flops_per_s_per_chip"] == pytest.approx(5e8)
    assert r["prefill_mfu"] == pytest.approx(0.25)
    # Decode per chip: weights 800 + experts 576 + KV 2*4*4.5*4/2 = 72 + embedding 32 = 1480.
    assert r["decode_bytes_per_step_per_chip"] == pytest.approx(1480)
    assert r["decode_bytes_per_step"] == pytest.approx(2960)
    assert r["decode_achieved_bytes_per_s_per_chip"] == pytest.approx(1480 / 2.672e-6)
    assert r["decode_mbu"] == pytest.approx(1480 / (2.672e-6 * 4e9))
    assert r["decode_flops_per_step"] == pytest.approx(1328)          # the model's
    assert r["decode_mfu"] == pytest.approx(664 / 5344)
    # Sent per step: 3 all-reduces of 1*8*4 = 32 B (32 each on 2 chips) + logits 40/2 = 116 B;
    # at 1e9 B/s the floor is 116 ns, 116e-9 / 2.672e-6 of the step.
    assert r["interconnect_bytes_per_step"] == pytest.approx(116)
    assert r["interconnect_floor_s"] == pytest.approx(116e-9)
    assert r["interconnect_share_of_tpot"] == pytest.approx(116e-9 / 2.672e-6)
    assert r["exceeds_peak"] is False
    # No bandwidth figure: no floor. One chip: nothing sent and no floor.
    blind = efficiency_for_run("qwen3_moe", TINY_MOE, "float32", 1, 3, 3, 3.424e-6, 2.672e-6,
                               2e9, 4e9, world_size=2)
    assert blind["interconnect_bytes_per_step"] == pytest.approx(116)
    assert blind["interconnect_floor_s"] is None and blind["interconnect_share_of_tpot"] is None
    one = efficiency_for_run("qwen3_moe", TINY_MOE, "float32", 1, 3, 3, 3.424e-6, 2.672e-6,
                             2e9, 4e9, interconnect_send_bytes_per_s=1e9)
    assert one["interconnect_bytes_per_step"] == 0 and one["interconnect_floor_s"] is None
    assert one["decode_bytes_per_step"] == one["decode_bytes_per_step_per_chip"] == pytest.approx(2672)


def _tiny_point(**layout):
    from types import SimpleNamespace

    tensor, expert = layout.get("tensor", 1), layout.get("expert", 1)
    return SimpleNamespace(family="qwen3_moe", dtype="float32", batch_size=1, input_length=3,
                           output_length=3, tensor_parallel=tensor, expert_parallel=expert,
                           world_size=tensor * expert,
                           model_config={k: v for k, v in TINY_MOE.items() if k != "model_type"})


def test_roofline_metrics_per_chip_and_cpu_world():
    from tpubench.measure.efficiency import roofline_metrics

    metrics = {"ttft_p50_s": 3.424e-6, "tpot_p50_s": 2.672e-6}
    chip = {"peak_flops": 2e9, "peak_bytes_per_s": 4e9, "interconnect_send_bytes_per_s": 1e9,
            "shared_by_world": False, "tolerance": 1.0}
    single, _ = roofline_metrics(_tiny_point(), metrics, chip)
    assert single["prefill_mfu"] == pytest.approx(0.5)
    assert "interconnect_bytes_per_step" not in single     # single-chip results keep their fields
    tp, exceeds = roofline_metrics(_tiny_point(tensor=2), metrics, chip)
    assert tp["prefill_mfu"] == pytest.approx(0.25) and exceeds is False
    assert tp["interconnect_bytes_per_step"] == pytest.approx(116)
    assert tp["interconnect_floor_s"] == pytest.approx(116e-9)
    ep, _ = roofline_metrics(_tiny_point(expert=2), metrics, chip)
    assert ep["decode_bytes_per_step_per_chip"] == pytest.approx(tp["decode_bytes_per_step_per_chip"])
    # A CPU world: the ranks share the host's probed peaks (each gets half) and there is no
    # interconnect figure, so the per-rank MFU equals the whole host's and no floor is given.
    host = {"peak_flops": 2e9, "peak_bytes_per_s": 4e9, "interconnect_send_bytes_per_s": None,
            "shared_by_world": True, "tolerance": 1.5}
    cpu, _ = roofline_metrics(_tiny_point(tensor=2), metrics, host)
    assert cpu["prefill_mfu"] == pytest.approx(0.5)
    assert cpu["interconnect_bytes_per_step"] == pytest.approx(116)
    assert cpu["interconnect_floor_s"] is None and cpu["interconnect_share_of_tpot"] is None


def test_spec_table_interconnect_figures():
    from tpubench.hardware.accelerators import chip_peaks, interconnect_send_bytes_per_s
    from tpubench.measure.efficiency import peaks_for

    # Bidirectional figures: a chip sends half. AWS's (direction unstated) are taken whole.
    assert interconnect_send_bytes_per_s(900e9, "bidirectional") == 450e9
    assert interconnect_send_bytes_per_s(1.28e12, "unstated") == 1.28e12
    assert interconnect_send_bytes_per_s(None, "bidirectional") is None
    expected = {"TPU v5e": 400e9, "TPU v5p": 1200e9, "TPU v6e": 800e9, "TPU7x": 1200e9,
                "A100 80GB": 600e9, "H100": 900e9, "H200": 900e9, "B200": 1.8e12,
                "Trainium": 384e9, "Trainium2": 1.28e12}
    for name, figure in expected.items():
        spec = chip_peaks(name)
        assert spec["interconnect_bytes_per_s"] == figure, name
        assert spec["interconnect_direction"] in ("bidirectional", "unstated"), name
        assert "interconnect figure:" in spec["source"], name
    for name in ("TPU v4", "L4", "Inferentia2"):   # no public per-chip figure: left empty
        assert chip_peaks(name)["interconnect_bytes_per_s"] is None, name
    assert peaks_for("cuda", "NVIDIA H100 80GB HBM3", "bfloat16")["interconnect_send_bytes_per_s"] == 450e9
    assert peaks_for("tpu", "TPU v6e", "bfloat16")["interconnect_send_bytes_per_s"] == 400e9


def test_roofline_metrics_use_measured_distinct_experts():
    """The measured distinct experts per decode step (one per MoE layer) replace uniform routing's
    expectation in the decode bytes: batch 4 of 4 experts top-2 expects 3.75, so a measured 3
    reads 0.75 expert of 144 fp32 parameters less (432 B), a measured 4 reads 0.25 more (144 B)."""
    from tpubench.measure.efficiency import roofline_metrics

    point = _tiny_point()
    point.batch_size = 4
    metrics = {"ttft_p50_s": 1e-3, "tpot_p50_s": 1e-3}
    chip = {"peak_flops": 2e12, "peak_bytes_per_s": 4e12, "shared_by_world": False, "tolerance": 1.0}
    expected, _ = roofline_metrics(point, metrics, chip)
    fewer, _ = roofline_metrics(point, metrics, chip, distinct_experts=[3.0])
    every, _ = roofline_metrics(point, metrics, chip, distinct_experts=[4.0])
    assert expected["expected_distinct_experts"] == pytest.approx(3.75)
    assert expected["decode_bytes_per_step"] - fewer["decode_bytes_per_step"] == pytest.approx(432)
    assert every["decode_bytes_per_step"] - expected["decode_bytes_per_step"] == pytest.approx(144)
    assert fewer["decode_mbu"] < expected["decode_mbu"] < every["decode_mbu"]

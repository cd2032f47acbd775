"""Shapes of the published models tpubench ships (data/published_models.json): every entry's
parameter count against its maker's published size, the new layer kinds' FLOPs and bytes worked out
by hand (a sliding window, gpt-oss's sinks and biased experts, a linear-attention state, the GLM-5
indexer, Llama 4's chunks, MiMo-V2-Flash's per-kind KV heads and narrow values), and each new builder
against the model transformers itself builds."""

from __future__ import annotations

import json

import pytest

from tpubench.estimate.features import kv_cache_bytes_per_chip
from tpubench.estimate.models import PUBLISHED_MODELS, published_model
from tpubench.hardware.counts import (
    decode_bytes_breakdown,
    decode_flops_per_step,
    kv_cache_bytes,
    prefill_flops,
    train_flops_per_token,
)
from tpubench.hardware.model_shape import LatentAttentionLayerShape, LinearAttentionLayerShape, ModelShape

# (entry, published total, published active, the exact count tpubench derives). The published
# figures are the makers' model cards (rounded; "active" labels such as A17B are rounded names and
# count the embedding row or not, or neither it nor the lm_head, hence the looser band). The exact
# counts equal what transformers 5.25 builds from the same config on the meta device, so they pin
# the accounting itself.
SIZES = [
    ("gpt-oss-120b", 116.8e9, 5.1e9, 116_829_156_672),
    ("gpt-oss-20b", 20.9e9, 3.6e9, 20_914_757_184),
    ("mixtral-8x7b", 46.7e9, 12.9e9, 46_702_792_704),
    ("qwen3.5-397b-a17b", 397e9, 17e9, 396_346_350_336),      # language model only (no vision tower)
    ("qwen3-235b-a22b", 235e9, 22e9, 235_093_634_560),
    ("qwen3-vl-235b-a22b", 235e9, 22e9, 235_093_634_560),     # its language model is Qwen3-235B's
    ("kimi-k2", 1.0e12, 32e9, 1_026_408_232_448),             # Moonshot: "1T" (rounded), 32B active
    ("kimi-k2.5", 1.0e12, 32e9, 1_026_408_232_448),
    ("glm-5", 744e9, 40e9, 743_911_218_432),
    ("glm-4.5", 355e9, 32e9, 352_797_829_024),                # without the MTP layer
    ("minimax-m2.5", 229e9, 10e9, 228_689_764_864),
    ("llama-4-scout-17b-16e", 109e9, 17e9, 107_769_861_120),  # Meta's 109B includes the vision encoder
    ("llama-4-maverick-17b-128e", 400e9, 17e9, 400_711_848_960),
    ("gemma-4-31b", 31e9, 31e9, 30_697_345_280),
    ("gemma-4-26b-a4b", 25.2e9, 3.8e9, 25_233_141_760),
    ("qwen2.5-32b", 32.5e9, 32.5e9, 32_763_876_352),
    ("llama-2-7b", 6.74e9, 6.74e9, 6_738_415_616),
    ("llama-2-13b", 13.0e9, 13.0e9, 13_015_864_320),
    ("codellama-13b", 13.0e9, 13.0e9, 13_016_028_160),
    ("mistral-7b-v0.2", 7.24e9, 7.24e9, 7_241_732_096),
    ("qwen3-8b", 8.2e9, 8.2e9, 8_190_735_360),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 30_532_122_624),
    ("glm-4.5-air", 106e9, 12e9, 106_852_251_264),            # without the MTP layer
    ("gemma-2-27b", 27e9, 27e9, 27_227_128_320),              # tied embeddings
    ("deepseek-v2-lite", 16e9, 2.4e9, 15_706_484_224),
    ("mimo-v2-flash", 309e9, 15e9, 308_778_780_864),          # without the MTP layers
]

# Entries whose maker gives only a size class ("7B"): the count is pinned exactly instead, and
# against transformers below (Qwen v1 and MiMo are Qwen2 layouts under remote code).
NOMINAL = [
    ("qwen-7b-chat", 7_721_324_544),
    ("mimo-7b-rl", 7_622_619_136),                            # without the MTP layer
]


@pytest.mark.parametrize("name,total,active,exact", SIZES, ids=[s[0] for s in SIZES])
def test_published_model_matches_its_published_size(name, total, active, exact):
    shape = published_model(name)[1]
    assert shape.total_params == exact
    # Kimi's "1T" is rounded to one significant figure: 2.6% below it is still 1T.
    assert shape.total_params == pytest.approx(total, rel=0.03 if name.startswith("kimi") else 0.02)
    with_embedding_row = shape.active_params + (0 if shape.tied_embeddings else shape.embedding_params)
    without_lm_head = shape.active_params - shape.lm_head_params   # GLM-4.5-Air's 12B
    assert (shape.active_params == pytest.approx(active, rel=0.06)
            or with_embedding_row == pytest.approx(active, rel=0.03)
            or without_lm_head == pytest.approx(active, rel=0.03))


@pytest.mark.parametrize("name,exact", NOMINAL, ids=[n[0] for n in NOMINAL])
def test_size_class_entries_are_pinned_exactly(name, exact):
    assert published_model(name)[1].total_params == exact


@pytest.mark.parametrize("alias,entry", [
    ("openai/gpt-oss-120b", "gpt-oss-120b"), ("gptoss", "gpt-oss-120b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5-397b-a17b"), ("qwen3.5", "qwen3.5-397b-a17b"),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", "qwen3-vl-235b-a22b"), ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
    ("kimik2.5", "kimi-k2.5"), ("zai-org/GLM-5.1", "glm-5"), ("glm5", "glm-5"), ("zai-org/GLM-4.6", "glm-4.5"),
    ("MiniMaxAI/MiniMax-M2", "minimax-m2.5"), ("minimaxm2.5", "minimax-m2.5"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "llama-4-maverick-17b-128e"),
    ("google/gemma-4-26B-A4B-it", "gemma-4-26b-a4b"), ("Qwen/Qwen2.5-32B-Instruct", "qwen2.5-32b"),
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b"), ("meta-llama/Llama-2-13b-hf", "llama-2-13b"),
    ("codellama/CodeLlama-13b-hf", "codellama-13b"), ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-v0.2"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"), ("meta-llama/Meta-Llama-3.1-70B", "llama-3.3-70b"),
    # the names SGLang-JAX's TPU rows use (model and published_model columns)
    ("Qwen/Qwen3-8B", "qwen3-8b"), ("Qwen3-8B", "qwen3-8b"), ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
    ("zai-org/GLM-4.5-Air", "glm-4.5-air"), ("GLM-4.5-Air", "glm-4.5-air"), ("zai-org/GLM-4.5", "glm-4.5"),
    ("google/gemma-2-27b-it", "gemma-2-27b"), ("gemma-2-27b-it", "gemma-2-27b"),
    ("Qwen/Qwen-7B-Chat", "qwen-7b-chat"), ("Qwen-7B-Chat", "qwen-7b-chat"),
    ("XiaomiMiMo/MiMo-7B-RL", "mimo-7b-rl"), ("MiMo-7B-RL", "mimo-7b-rl"),
    ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite"), ("DeepSeek-V2-Lite", "deepseek-v2-lite"),
    ("XiaomiMiMo/MiMo-V2-Flash", "mimo-v2-flash"), ("MiMo-V2-Flash", "mimo-v2-flash"),
])
def test_publishers_names_reach_their_entry(alias, entry):
    assert published_model(alias)[0] == entry


# --- gpt-oss: sliding window, sinks, biased experts --------------------------------------------

# Tiny gpt-oss: hidden 8, 2 layers (sliding window 3, then full), 2 heads / 1 KV head of 4,
# 4 experts of 6 (top 2), vocab 10, untied.
#   attention: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192 weights; biases 8 + 4 + 4 + 8 = 24; sinks 2
#   router 8x4 = 32 (+ bias 4); one expert: gate_up 8x12 + down 6x8 = 144, biases 12 + 8 = 20 -> 164
#   layer: 192 + 24 + 2 + 32 + 4 + 4*164 + 2 norms of 8 = 926; two layers 1852
#   embed 80 + lm_head 80 + final norm 8 -> total 2020
#   active: 2 x (192 + 32 + 2*164) + lm_head 80 = 1184
TINY_GPT_OSS = {
    "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 4, "intermediate_size": 6, "num_local_experts": 4, "num_experts_per_tok": 2,
    "sliding_window": 3, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": True,
    "vocab_size": 10, "tie_word_embeddings": False,
}


def test_gpt_oss_by_hand_sliding_window_sinks_and_expert_biases():
    shape = ModelShape.from_config("gpt_oss", TINY_GPT_OSS)
    assert shape.total_params == 2020
    assert shape.active_params == 1184
    assert [layer.window for layer in shape.layers] == [3, None]
    # Decode at context 5: the sliding layer attends 3 tokens, the full one 5.
    # FLOPs per token: 2 x 1184 + 4 heads-dims (2 x 4) x (3 + 5) = 2368 + 256
    assert decode_flops_per_step(shape, 2, 5) == 2 * (2368 + 256)
    # KV bytes (bf16, batch 2): 2 (K, V) x 1 head x 4 x 2 B = 16 per token, x (3 + 5) tokens x 2.
    assert decode_bytes_breakdown(shape, 2, 5, "bfloat16")["kv_cache"] == 16 * 8 * 2
    assert kv_cache_bytes(shape, 2, 5, "bfloat16") == 16 * 8 * 2
    # Prefill of 5 tokens: position p attends min(p, 3) keys in the sliding layer (1+2+3+3+3 = 12)
    # and p in the full one (15); matmuls 2 x (1184 - 80) per position, the lm_head once.
    assert prefill_flops(shape, 1, 5) == 5 * 2 * 1104 + 4 * 8 * (12 + 15) + 2 * 80


def test_gpt_oss_120b_cache_by_hand():
    shape = published_model("openai/gpt-oss-120b")[1]
    assert [layer.window for layer in shape.layers[:2]] == [128, None] and len(shape.layers) == 36
    # 8 KV heads of 64, bf16: 2048 B per token and layer; 18 layers keep 128 tokens, 18 keep all.
    assert kv_cache_bytes(shape, 1, 4096, 2) == 2048 * (18 * 128 + 18 * 4096)
    # Experts hold all but 1.9% of the weights (the MXFP4 part of the checkpoint).
    assert shape.expert_params / shape.total_params == pytest.approx(0.981, abs=0.001)


# --- Qwen3.5: Gated DeltaNet state, no KV cache -------------------------------------------------

# Tiny Qwen3.5 MoE: hidden 8, 2 layers (linear, full), full attention 2 heads / 1 KV head of 4
# with an output gate; linear attention 1 key head of 2, 2 value heads of 3, conv kernel 4;
# 4 experts of 6 (top 2) + a shared expert of 5; vocab 10, untied.
#   linear layer: q,k (2 each) v,z (6 each): 8 x (2+2+6+6) = 128, b and a 8 x 2 x 2 = 32,
#     out 6 x 8 = 48 -> 208 weights; conv (2+2+6) x 4 = 40, dt_bias + A_log 4, gated norm 3 -> 47
#   full layer: q (with gate) 8 x 16 = 128, k, v 8 x 4 x 2 = 64, o 8 x 8 = 64 -> 256; q/k norms 8
#   MoE: router 8 x 4 + shared gate 8 = 40, shared expert 3 x 8 x 5 = 120, experts 4 x 144 = 576
#   layers: (208 + 47) + (256 + 8) + 2 x (40 + 120 + 576 + 16 norms) = 2023
#   embed 80 + lm_head 80 + final norm 8 -> total 2191
TINY_QWEN35 = {
    "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 4, "layer_types": ["linear_attention", "full_attention"], "attn_output_gate": True,
    "linear_num_key_heads": 1, "linear_key_head_dim": 2, "linear_num_value_heads": 2,
    "linear_value_head_dim": 3, "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 6, "shared_expert_intermediate_size": 5, "vocab_size": 10,
    "tie_word_embeddings": False,
}


def test_linear_attention_state_by_hand():
    shape = ModelShape.from_config("qwen3_5_moe_text", TINY_QWEN35)
    assert shape.total_params == 2191
    linear, full = shape.layers
    assert isinstance(linear, LinearAttentionLayerShape) and not isinstance(full, LinearAttentionLayerShape)
    # The state: 2 value heads x 2 x 3, plus conv_dim 10 x (4 - 1) inputs: 42 values per sequence.
    assert linear.kv_bytes_per_token(2) == (12 + 30) * 2
    # Its bytes do not grow with the context; the full layer's K and V do (2 x 1 x 4 x 2 B per token).
    for context in (10, 1000):
        assert kv_cache_bytes(shape, 3, context, 2) == 3 * (84 + 16 * context)
        assert decode_bytes_breakdown(shape, 3, context, 2)["kv_cache"] == 3 * (84 + 16 * context)
    # Recurrence FLOPs: 3 state-sized products x 2 FLOPs per MAC per token: 6 x 2 x 2 x 3 = 72,
    # whatever the context; the full layer's attention 4 x 2 x 4 = 32 per attended key.
    matmuls = 2 * shape.active_params
    assert decode_flops_per_step(shape, 1, 10) == matmuls + 72 + 32 * 10
    assert decode_flops_per_step(shape, 1, 1000) == matmuls + 72 + 32 * 1000
    # Prefill of 6 tokens: 72 per token in the linear layer, 1+...+6 = 21 keys in the full one.
    per_position = 2 * (shape.active_params - shape.lm_head_params)
    assert prefill_flops(shape, 1, 6) == 6 * per_position + 6 * 72 + 32 * 21 + 2 * shape.lm_head_params
    # Training: the recurrence is 3x its forward per token at any length; the full layer PaLM's 12HQT.
    attention_2k = train_flops_per_token(shape, 2048) - 6 * shape.active_params
    assert attention_2k == 3 * 72 + 12 * 2 * 4 * 2048
    # A tensor-parallel group splits the state by value head (2 here) like a cache by KV head.
    assert kv_cache_bytes_per_chip(shape, 1, 10, 2, 2) == 84 / 2 + 16 * 10


def test_qwen35_397b_state_and_cache_by_hand():
    shape = published_model("Qwen/Qwen3.5-397B-A17B-FP8")[1]
    kinds = [type(layer) for layer in shape.layers]
    assert kinds.count(LinearAttentionLayerShape) == 45 and len(kinds) == 60
    # Per sequence: 45 linear layers x (64 heads x 128 x 128 + conv (2 x 16 x 128 + 64 x 128) x 3)
    # values; 15 full layers x 2 KV heads x 256 x (K, V) per token; bf16.
    state = 45 * (64 * 128 * 128 + 12288 * 3) * 2
    assert state == 97_689_600
    assert kv_cache_bytes(shape, 1, 8192, 2) == state + 15 * 2 * 2 * 256 * 2 * 8192
    assert shape.n_experts == 512 and shape.top_k == 10


# --- GLM-5's indexer, Kimi's MLA, Llama 4's chunks, the nested configs --------------------------

def test_glm5_indexer_and_kimi_mla_by_hand():
    glm = published_model("zai-org/GLM-5")[1]
    layer = glm.layers[-1]
    assert isinstance(layer, LatentAttentionLayerShape)
    # Cache: one 512 latent + 64 rotary key + the indexer's 128-wide key per token.
    assert layer.kv_bytes_per_token(1) == 512 + 64 + 128
    # Per attended key: QK^T over 192 + 64, PV over 256, 64 heads; the indexer's 32 heads of 128.
    assert layer.attention_flops_per_token(1) == 2 * (64 * (256 + 256) + 32 * 128)
    assert len(glm.moe_layers) == 78 - 3
    kimi = published_model("moonshotai/Kimi-K2-Instruct")[1]
    assert kimi.layers[-1].kv_bytes_per_token(1) == 512 + 64
    assert (len(kimi.moe_layers), kimi.n_experts, kimi.top_k) == (60, 384, 8)


def test_llama4_chunked_layers_and_interleaved_experts():
    scout = published_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")[1]
    maverick = published_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")[1]
    # Three layers in four attend within 8192-token chunks (counted as a window), every fourth all.
    assert [layer.window for layer in scout.layers[:4]] == [8192, 8192, 8192, None]
    assert (len(scout.moe_layers), len(maverick.moe_layers)) == (48, 24)
    assert maverick.layers[0].mlp_matmul_params == 3 * 5120 * 16384        # dense layer
    assert maverick.layers[1].mlp_matmul_params == 3 * 5120 * 8192         # shared expert
    # Up to one chunk the cache is the whole context; past it a chunked layer keeps at most 8192.
    per_token = 2 * 8 * 128 * 2
    assert kv_cache_bytes(scout, 1, 4096, 2) == 48 * per_token * 4096
    assert kv_cache_bytes(scout, 1, 10000, 2) == per_token * (36 * 8192 + 12 * 10000)


# --- MiMo-V2-Flash, Gemma 2, DeepSeek-V2-Lite ---------------------------------------------------

def test_mimo_v2_flash_kv_heads_windows_and_narrow_values_by_hand():
    shape = published_model("XiaomiMiMo/MiMo-V2-Flash")[1]
    full = [i for i, layer in enumerate(shape.layers) if layer.window is None]
    assert full == [0, 5, 11, 17, 23, 29, 35, 41, 47] and len(shape.layers) == 48
    # Sliding layers: 128 previous tokens plus the query, 8 KV heads; full layers 4 KV heads.
    assert {(layer.window, layer.n_kv_heads) for layer in shape.layers} == {(None, 4), (129, 8)}
    # Keys 192 wide, values 128: a cached token holds 4 x (192 + 128) values in a full layer, 8 x in a
    # sliding one (bf16); a query reads QK^T over 192 and PV over 128 for each of 64 heads.
    assert shape.layers[0].kv_bytes_per_token(2) == 4 * (192 + 128) * 2
    assert shape.layers[1].kv_bytes_per_token(2) == 8 * (192 + 128) * 2
    assert shape.layers[1].attention_flops_per_token(1) == 2 * 64 * (192 + 128)
    assert kv_cache_bytes(shape, 1, 4096, 2) == 9 * 2560 * 4096 + 39 * 5120 * 129
    attention = 2 * 64 * (192 + 128) * (9 * 4096 + 39 * 129)
    assert decode_flops_per_step(shape, 1, 4096) == 2 * shape.active_params + attention
    # Layer 0 dense; 47 MoE layers of 256 experts (top 8), no shared expert.
    assert shape.layers[0].mlp_matmul_params == 3 * 4096 * 16384 and not shape.layers[0].is_moe
    assert (len(shape.moe_layers), shape.n_experts, shape.top_k) == (47, 256, 8)
    assert shape.layers[1].mlp_matmul_params == 0


def test_gemma2_alternates_sliding_and_global_layers():
    shape = published_model("google/gemma-2-27b-it")[1]
    assert [layer.window for layer in shape.layers[:4]] == [4096, None, 4096, None]
    assert shape.tied_embeddings and len(shape.layers) == 46
    # 16 KV heads of 128 (bf16): 8192 B per token and layer; 23 layers keep 4096 tokens, 23 all.
    assert kv_cache_bytes(shape, 1, 8192, 2) == 8192 * (23 * 4096 + 23 * 8192)


def test_deepseek_v2_lite_mla_without_router_bias():
    shape = published_model("deepseek-ai/DeepSeek-V2-Lite")[1]
    layer = shape.layers[1]
    assert isinstance(layer, LatentAttentionLayerShape) and layer.kv_bytes_per_token(1) == 512 + 64
    # Norms only (kv_a 512, two of 2048): V2's greedy router has no score-correction bias.
    assert layer.other_params == 512 + 2 * 2048
    assert (len(shape.moe_layers), shape.n_experts, shape.top_k) == (26, 64, 6)


def test_multimodal_configs_read_their_text_config_with_the_top_level_tie():
    nested = {"model_type": "qwen3_5_moe", "tie_word_embeddings": False,
              "text_config": {"model_type": "qwen3_5_moe_text", **{k: v for k, v in TINY_QWEN35.items()
                                                                   if k != "tie_word_embeddings"}}}
    shape = ModelShape.from_config(None, nested)
    assert shape.family == "qwen3_5_moe_text" and not shape.tied_embeddings
    assert shape.total_params == ModelShape.from_config("qwen3_5_moe_text", TINY_QWEN35).total_params
    tied = ModelShape.from_config(None, {**nested, "tie_word_embeddings": True})
    assert tied.tied_embeddings and tied.total_params == shape.total_params - 80


# --- every new builder against transformers, on tiny configs ------------------------------------

TINY = {
    "gpt_oss": TINY_GPT_OSS,
    "qwen3_5_moe_text": TINY_QWEN35,
    "qwen3_next": {**{k: v for k, v in TINY_QWEN35.items() if k not in ("layer_types", "attn_output_gate")},
                   "num_hidden_layers": 4, "full_attention_interval": 2, "intermediate_size": 12},
    "glm4_moe": {"hidden_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
                 "head_dim": 4, "intermediate_size": 12, "moe_intermediate_size": 6, "n_routed_experts": 4,
                 "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
                 "attention_bias": True, "use_qk_norm": True, "vocab_size": 10, "tie_word_embeddings": False},
    "minimax_m2": {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                   "head_dim": 4, "intermediate_size": 6, "num_local_experts": 4, "num_experts_per_tok": 2,
                   "use_qk_norm": True, "vocab_size": 10, "tie_word_embeddings": False},
    "llama4_text": {"hidden_size": 8, "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
                    "head_dim": 4, "intermediate_size": 6, "intermediate_size_mlp": 12, "num_local_experts": 4,
                    "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "attention_chunk_size": 16,
                    "vocab_size": 10, "tie_word_embeddings": False},
    "glm_moe_dsa": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10,
                    "q_lora_rank": 8, "kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
                    "v_head_dim": 4, "intermediate_size": 12, "moe_intermediate_size": 6, "n_routed_experts": 4,
                    "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
                    "index_n_heads": 2, "index_head_dim": 4, "index_topk": 8, "tie_word_embeddings": False},
    "mixtral": {"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                "intermediate_size": 6, "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 10,
                "tie_word_embeddings": False},
    "gemma2": {"hidden_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
               "head_dim": 4, "intermediate_size": 12, "sliding_window": 3, "vocab_size": 10},
    "deepseek_v2": {"hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2, "vocab_size": 10,
                    "q_lora_rank": None, "kv_lora_rank": 8, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
                    "v_head_dim": 4, "intermediate_size": 12, "moe_intermediate_size": 6, "n_routed_experts": 4,
                    "n_shared_experts": 2, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
                    "tie_word_embeddings": False},
    "mimo_v2_flash": {"hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1,
                      "swa_num_key_value_heads": 2, "head_dim": 6, "v_head_dim": 4, "intermediate_size": 20,
                      "moe_intermediate_size": 6, "n_routed_experts": 4, "num_experts_per_tok": 2,
                      "sliding_window_size": 3, "vocab_size": 10, "tie_word_embeddings": False},
}


@pytest.mark.parametrize("family", sorted(TINY))
def test_each_new_builder_counts_what_transformers_builds(family):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = transformers.CONFIG_MAPPING[family](**TINY[family])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    # The routers' score-correction biases are buffers in transformers, parameters in a checkpoint.
    expected = (sum(p.numel() for p in model.parameters())
                + sum(b.numel() for name, b in model.named_buffers() if "e_score_correction_bias" in name))
    assert ModelShape.from_config(family, TINY[family]).total_params == expected


# The entries added for SGLang-JAX's TPU rows, as shipped, against transformers' own model: the
# remote-code models (Qwen v1, MiMo) through the Qwen2 class whose layout they share.
NEW_ENTRIES = ["qwen3-8b", "qwen3-30b-a3b", "glm-4.5-air", "gemma-2-27b", "qwen-7b-chat", "mimo-7b-rl",
               "deepseek-v2-lite", "mimo-v2-flash"]


@pytest.mark.parametrize("name", NEW_ENTRIES)
def test_shipped_entry_counts_what_transformers_builds_from_it(name):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    entry = json.loads(PUBLISHED_MODELS.read_text(encoding="utf-8"))["models"][name]
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.CONFIG_MAPPING[entry["family"]](**entry["config"]))
    expected = (sum(p.numel() for p in model.parameters())
                + sum(b.numel() for n, b in model.named_buffers() if "e_score_correction_bias" in n))
    assert published_model(name)[1].total_params == expected

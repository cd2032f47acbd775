"""The JAX twin computes what transformers computes: same weights, same logits, same greedy tokens.

Tiny random models (hidden 64, 4 heads / 2 kv heads, head_dim 16, 8 experts top-2, vocab 128),
initialised with std 0.5 instead of 0.02 so logits are spread out (std ~4) and greedy tokens vary;
with the default init every greedy token would be the same and the comparison would prove little.
The torch reference is transformers' own forward with a StaticCache (prefill, then one token per
step at an explicit position), exactly the workload the benchmark times.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from transformers import (  # noqa: E402
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    StaticCache,
)

from tpubench.models import jax_twin as jt  # noqa: E402

pytestmark = pytest.mark.slow   # real models in torch and JAX side by side

B, PROMPT, STEPS, MAX_LEN = 2, 7, 6, 16
FP32_TOL = 1e-3  # hard limit; we expect and print ~5e-5 (float32 summation order only)


def _common(**kw):
    base = dict(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
        initializer_range=0.5,
    )  # fmt: skip
    base.update(kw)
    return base


def _moe_config(**kw):
    kw = dict(dict(moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True), **kw)
    return Qwen3MoeConfig(**_common(**kw))


def _build(cls, cfg, dtype=torch.float32):
    torch.manual_seed(0)
    model = cls(cfg).eval()
    if hasattr(model, "set_experts_implementation") and getattr(cfg, "num_experts", 0):
        model.set_experts_implementation("eager")
    model.set_attn_implementation("eager")
    return model.to(dtype)


def _prompt(seed=1):
    return torch.randint(0, 128, (B, PROMPT), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def _torch_greedy(model, ids, steps=STEPS, forced=None):
    """transformers with a StaticCache: logits [steps,B,V] float32 and greedy tokens [B,steps]."""
    cache = StaticCache(config=model.config, max_cache_len=MAX_LEN)
    out = model(ids, cache=cache, use_cache=True)  # 5.x name; past_key_values= is a deprecated alias
    logits = [out.logits[:, -1].float()]
    toks = [logits[-1].argmax(-1)]
    n = ids.shape[1]
    for s in range(steps - 1):
        feed = toks[-1] if forced is None else torch.as_tensor(forced[:, s])
        pos = torch.full((ids.shape[0], 1), n + s)
        out = model(feed[:, None], cache=cache, use_cache=True, position_ids=pos)
        logits.append(out.logits[:, -1].float())
        toks.append(logits[-1].argmax(-1))
    return torch.stack(logits).numpy(), torch.stack(toks, 1).numpy()


def _compare_fp32(model, label):
    ids = _prompt()
    ref_logits, ref_toks = _torch_greedy(model, ids)
    assert len(set(ref_toks.ravel().tolist())) > 2, "degenerate reference: greedy tokens do not vary"
    cfg = jt.TwinConfig.from_hf(model.config)
    params = jt.params_from_torch(model, "float32")
    dec = jt.jitted()[1]
    n0 = dec._cache_size()
    toks, logits = jt.greedy_generate(params, cfg, ids.numpy(), STEPS, max_len=MAX_LEN, return_logits=True)
    assert dec._cache_size() - n0 == 1, "decode must compile once for all positions"
    err = float(np.abs(logits - ref_logits).max())
    print(f"\n[{label}] fp32 max|dlogit| = {err:.2e} (logit std {ref_logits.std():.2f}), tokens {toks[0]}")
    np.testing.assert_array_equal(toks, ref_toks)
    assert err <= FP32_TOL
    return err


def test_qwen3_moe_fp32_matches_torch():
    model = _build(Qwen3MoeForCausalLM, _moe_config())
    cfg = jt.TwinConfig.from_hf(model.config)
    assert (cfg.moe_prefill, cfg.moe_decode) == ("ragged", "gather")  # the defaults being tested
    _compare_fp32(model, "qwen3_moe")


def test_qwen3_moe_variants_fp32_matches_torch():
    # norm_topk_prob False, a dense mlp_only layer, tied embeddings and attention biases at once.
    hf = _moe_config(norm_topk_prob=False, mlp_only_layers=[1], tie_word_embeddings=True, attention_bias=True)
    model = _build(Qwen3MoeForCausalLM, hf)
    cfg = jt.TwinConfig.from_hf(model.config)
    assert cfg.moe_layers == (True, False) and cfg.tie_word_embeddings and not cfg.norm_topk_prob
    params = jt.params_from_torch(model)
    assert "lm_head" not in params and "bq" in params["layers"][0] and "router" not in params["layers"][1]
    _compare_fp32(model, "qwen3_moe variants")


def test_qwen3_dense_fp32_matches_torch():
    model = _build(Qwen3ForCausalLM, Qwen3Config(**_common()))
    assert jt.TwinConfig.from_hf(model.config).num_experts == 0
    _compare_fp32(model, "qwen3")


def test_bf16_matches_torch_bf16():
    """bf16 twin vs bf16 torch, teacher-forced on torch's tokens so a near-tie cannot split paths.

    Both sides round every matmul output, residual and the logits themselves to bf16 (rel. eps
    2^-8; one ulp of a logit near 10 is 0.06) but sum in different orders, and a near-tie in the
    router can flip an expert choice.  The honest yardstick is torch's own bf16 error, |torch bf16
    - torch fp32| on the same weights: the twin must differ from torch bf16 by no more than that
    (measured ratio 0.5-1.2 on the max, 0.6-0.9 on the mean; we allow 1.5), must be as close to
    the fp32 reference as torch bf16 is, and must pick torch's greedy token wherever torch's top-2
    margin is clear of that noise.
    """
    hf = _moe_config()
    model = _build(Qwen3MoeForCausalLM, hf, dtype=torch.bfloat16)
    ids = _prompt()
    ref_logits, ref_toks = _torch_greedy(model, ids)
    ref32, _ = _torch_greedy(_build(Qwen3MoeForCausalLM, hf), ids, forced=ref_toks)
    params = jt.params_from_torch(model)
    assert params["embed"].dtype == jnp.bfloat16
    toks, logits = jt.greedy_generate(
        params, model.config, ids.numpy(), STEPS, max_len=MAX_LEN, return_logits=True, forced_tokens=ref_toks
    )
    d, noise, d32 = np.abs(logits - ref_logits), np.abs(ref_logits - ref32), np.abs(logits - ref32)
    std = float(ref32.std())
    print(f"\n[qwen3_moe bf16] max|dlogit| = {d.max():.3f}, mean {d.mean():.4f} (logit std {std:.2f}); "
          f"torch bf16 vs fp32: max {noise.max():.3f}, mean {noise.mean():.4f}; twin bf16 vs torch fp32: "
          f"max {d32.max():.3f}, mean {d32.mean():.4f}; token agreement {np.mean(toks == ref_toks):.0%}")  # fmt: skip
    assert d.max() <= 1.5 * noise.max() and d.mean() <= 1.5 * noise.mean()
    assert d32.mean() <= 1.5 * noise.mean()
    assert d.max() <= 0.15 * std
    top2 = np.sort(ref_logits, axis=-1)[..., -2:]
    clear = (top2[..., 1] - top2[..., 0]).T > 2 * noise.max()  # [B, steps]
    np.testing.assert_array_equal(toks[clear], ref_toks[clear])


def test_moe_formulations_match_torch_block():
    """gather / ragged / dense expert formulations vs transformers' eager Qwen3MoeSparseMoeBlock.

    (norm_topk_prob=False is covered end to end by the variants test.)"""
    model = _build(Qwen3MoeForCausalLM, _moe_config())
    block = model.model.layers[0].mlp
    x = torch.randn(2, 6, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = block(x).numpy()
    cfg = jt.TwinConfig.from_hf(model.config)
    lp = jt.params_from_torch(model)["layers"][0]
    impls = ("gather", "ragged", "dense")
    outs = jax.jit(lambda lp, x: [jt._moe(cfg, lp, x, i)[0] for i in impls])(lp, jnp.asarray(x.numpy()))
    for impl, out in zip(impls, outs):
        np.testing.assert_allclose(np.asarray(out), ref, atol=2e-5, rtol=1e-5, err_msg=impl)


def test_moe_layer_selection_matches_torch_modules():
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cases = (dict(decoder_sparse_step=2), dict(mlp_only_layers=[0, 3]), dict(decoder_sparse_step=3, mlp_only_layers=[2]))
    for kw in cases:
        hf = Qwen3MoeConfig(**_common(num_hidden_layers=6, hidden_size=16, num_attention_heads=2, head_dim=8,
                                      num_key_value_heads=1, intermediate_size=8, moe_intermediate_size=8,
                                      num_experts=2, num_experts_per_tok=1, **kw))  # fmt: skip
        model = Qwen3MoeForCausalLM(hf)
        want = tuple(isinstance(layer.mlp, Qwen3MoeSparseMoeBlock) for layer in model.model.layers)
        assert jt.TwinConfig.from_hf(hf).moe_layers == want, kw
        params = jt.params_from_torch(model)
        assert tuple("router" in lp for lp in params["layers"]) == want


def _assert_same_tree(a, b):
    fa, ta = jax.tree_util.tree_flatten(a)
    fb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(fa, fb):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))


def test_params_from_safetensors(tmp_path):
    import safetensors.torch

    model = _build(Qwen3MoeForCausalLM, _moe_config(), dtype=torch.bfloat16)
    want = jt.params_from_torch(model)
    # 1) whatever transformers' save_pretrained writes
    model.save_pretrained(tmp_path / "hf")
    _assert_same_tree(jt.params_from_safetensors(tmp_path / "hf", model.config), want)
    # 2) the original per-expert layout of Hub checkpoints (transformers 5 fuses it on load)
    sd = {k: v.clone() for k, v in model.state_dict().items() if "experts" not in k}
    for i, layer in enumerate(model.model.layers):
        gu, dn = layer.mlp.experts.gate_up_proj.detach(), layer.mlp.experts.down_proj.detach()
        inter = gu.shape[1] // 2
        for j in range(gu.shape[0]):
            p = f"model.layers.{i}.mlp.experts.{j}."
            sd[p + "gate_proj.weight"] = gu[j, :inter].clone()
            sd[p + "up_proj.weight"] = gu[j, inter:].clone()
            sd[p + "down_proj.weight"] = dn[j].clone()
    safetensors.torch.save_file(sd, str(tmp_path / "per_expert.safetensors"))
    got = jt.params_from_safetensors(tmp_path / "per_expert.safetensors", jt.TwinConfig.from_hf(model.config))
    _assert_same_tree(got, want)
    # dtype conversion on load
    assert jt.params_from_safetensors(tmp_path / "hf", model.config, dtype="float32")["embed"].dtype == jnp.float32


def test_config_static_and_unsupported():
    cfg = jt.TwinConfig.from_hf(_moe_config())
    assert hash(cfg) == hash(jt.TwinConfig.from_hf(_moe_config()))
    assert cfg.rope_theta == 10000.0 and cfg.head_dim == 16
    with pytest.raises(ValueError):
        dataclasses.replace(cfg, moe_decode="nope")
    with pytest.raises(NotImplementedError):
        jt.TwinConfig.from_hf(_moe_config(use_sliding_window=True))
    with pytest.raises(NotImplementedError):
        jt.TwinConfig.from_hf(transformers.LlamaConfig())
    cache = jt.init_cache(cfg, 3, 32, "bfloat16")
    assert len(cache["k"]) == 2 and cache["k"][0].shape == (3, 32, 2, 16) and cache["v"][1].dtype == jnp.bfloat16


def test_jax_device_info():
    info = jt.jax_device_info()
    assert set(info) == {"platform", "device_kind", "count"} and info["count"] >= 1


def test_tpubench_import_does_not_import_jax():
    code = "import sys, tpubench, tpubench.models; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_zeroed_kv_cache_is_fenced_before_the_clock_starts(monkeypatch):
    """The fresh cache of each iteration is waited for before the first timed clock read, so its
    zeroing is never charged to prefill (TTFT)."""
    import jax

    from tpubench.backends import jax as jax_backend
    from tpubench.measure import timing as measure
    from tpubench.scenarios.generate.measure import run_iteration

    events = []

    class Cache:
        pass

    def new_cache():
        cache = Cache()
        events.append(("new cache", id(cache)))
        return cache

    def block_until_ready(x):
        events.append(("ready", id(x)))
        return x

    def clock():
        events.append(("clock", None))
        return float(len(events))

    def step(*args):
        cache = args[-1]
        events.append(("step", id(cache)))
        return "token", "logits", cache

    monkeypatch.setattr(jax, "block_until_ready", block_until_ready)
    monkeypatch.setattr(measure.time, "perf_counter", clock)
    session = object.__new__(jax_backend.JaxSession)
    session.params, session.ids, session.positions, session._last = None, None, [0, 1], None
    session._new_cache, session._prefill, session._decode = new_cache, step, step
    run_iteration(session, output_length=2)
    (cache_id,) = [i for kind, i in events if kind == "new cache"]
    first_clock = events.index(("clock", None))
    assert ("ready", cache_id) in events[:first_clock], events

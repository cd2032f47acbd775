"""Compact JAX twin of transformers' Qwen3 (dense) and Qwen3-MoE causal LMs.

It loads exactly the torch model's weights (from ``model.state_dict()`` or from the safetensors
checkpoint) and runs prefill + greedy decode over a static KV cache, so the same workload can be
timed through PyTorch and through JAX on the same chip and the two can be checked for agreement
(docs/measurement.md#numerics).  Numerics follow transformers 5 (modeling_qwen3.py / modeling_qwen3_moe.py)
operation by operation, including where they up-cast to float32 (RMSNorm, attention softmax,
router softmax, RoPE tables).

Everything is a pure function of ``(params, config, ...)``; ``config`` is a frozen, hashable
:class:`TwinConfig` and is a *static* jit argument, every array shape is static (fixed-size cache,
attention masked by position), so ``jax.jit(...).lower(...).compile()`` compiles once per shape.

This module imports jax at import time; nothing in ``tpubench`` imports it eagerly.

Layouts
-------
params (pytree of jnp arrays, torch's [out, in] weight layout, no transposes at load):
  ``embed [V,D]``, ``final_norm [D]``, ``lm_head [V,D]`` (absent when tied), ``layers``: a list
  of dicts ``ln1, ln2 [D]; wq [H*hd,D], wk/wv [KVH*hd,D], wo [D,H*hd], q_norm/k_norm [hd]``
  (+ ``bq, bk, bv, bo`` when attention_bias) and either ``router [E,D], w_gate_up [E,2I,D],
  w_down [E,D,I]`` (MoE layer; gate rows first, as transformers 5 fuses them) or
  ``w_gate [F,D], w_up [F,D], w_down [D,F]`` (dense layer).
cache: ``{"k": [L arrays [B,S,KVH,hd]], "v": [...]}`` with S = max_len.

MoE formulations (static config fields, all exact up to float summation order)
------------------------------------------------------------------------------
* ``"gather"`` (decode default): gathers the top-k experts' weights per token,
  ``w_gate_up[topk_idx] -> [N,k,2I,D]``; reads N*k expert matrices, FLOPs = active experts only.
  Right for decode where N = batch is small (memory bound).  For N*k >> E it duplicates weights.
* ``"ragged"`` (prefill default): sorts the N*k (token, expert) pairs by expert and runs two
  grouped GEMMs with ``lax.ragged_dot_general`` (native on TPU/GPU; on CPU jax lowers it to a
  masked dense dot).  FLOPs = active experts only: 2*N*k*3*D*I per layer.
* ``"tokamax"``: the same grouped GEMMs through ``tokamax.ragged_dot_general`` with the
  implementation named in ``tokamax_implementation`` (xla, mosaic, triton; models/jax_experts.py
  chooses it per platform).  Only that implementation is tried: one that cannot run raises.
  tokamax is imported when the step is traced, never by this module.
* ``"dense"``: every token through every expert, outputs weighted by routing weights that are zero
  for unselected experts.  Simple and shape-friendly but costs E/k times the active expert FLOPs
  (x16 for Qwen3-30B-A3B: E=128, k=8).  Kept as a reference / fallback.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "TwinConfig",
    "params_from_torch",
    "params_from_safetensors",
    "init_cache",
    "prefill",
    "decode_step",
    "jitted",
    "greedy_generate",
    "param_count",
    "jax_device_info",
    "with_routing",
    "route_trace",
]

# "ragged_dot" is the workload's name for "ragged" (jax.lax.ragged_dot in its general form).
_MOE_IMPLS = ("gather", "ragged", "ragged_dot", "dense", "tokamax")
_TOKAMAX_IMPLS = ("xla", "mosaic", "triton")


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TwinConfig:
    """Static, hashable description of the architecture (a jit static argument)."""

    arch: str  # "qwen3" | "qwen3_moe"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (qwen3 layers and qwen3_moe mlp_only layers)
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    # MoE (num_experts == 0 for the dense arch)
    num_experts: int = 0
    top_k: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple[bool, ...] = ()  # per layer: True = routed experts, False = dense MLP
    # implementation choices (not architecture): see module docstring
    moe_prefill: str = "ragged"
    moe_decode: str = "gather"
    tokamax_implementation: str = "xla"  # Tokamax's ragged_dot kernel, where a formulation is "tokamax"
    # routing control (models/routing.py): params["routing"] holds one schedule table [P,k] per
    # MoE layer and the router's selection is biased onto it; record_routes makes prefill and
    # decode_step also return the chosen experts [MoE layers, tokens, k] (an untimed pass).
    routed: bool = False
    record_routes: bool = False

    def __post_init__(self):
        if self.arch not in ("qwen3", "qwen3_moe"):
            raise ValueError(f"unsupported arch {self.arch!r}")
        if len(self.moe_layers) != self.num_layers:
            raise ValueError("moe_layers must have one entry per layer")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads")
        for f in ("moe_prefill", "moe_decode"):
            if getattr(self, f) not in _MOE_IMPLS:
                raise ValueError(f"{f} must be one of {_MOE_IMPLS}, got {getattr(self, f)!r}")
        if self.tokamax_implementation not in _TOKAMAX_IMPLS:
            raise ValueError(f"tokamax_implementation must be one of {_TOKAMAX_IMPLS}, "
                             f"got {self.tokamax_implementation!r}")

    @classmethod
    def from_hf(cls, hf_config: Any, **overrides) -> TwinConfig:
        """Build from a transformers ``Qwen3Config`` / ``Qwen3MoeConfig`` (or a dict of one)."""
        c = hf_config
        if isinstance(c, dict):
            c = _AttrDict(c)
        elif hasattr(c, "get_text_config"):
            c = c.get_text_config(decoder=True)
        mt = getattr(c, "model_type", None)
        if mt not in ("qwen3", "qwen3_moe"):
            raise NotImplementedError(f"jax twin supports qwen3 and qwen3_moe, not {mt!r}")
        act = getattr(c, "hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise NotImplementedError(f"hidden_act {act!r} not supported (silu only)")
        if getattr(c, "sliding_window", None) is not None:
            raise NotImplementedError("sliding-window attention is not supported by the jax twin")
        layer_types = getattr(c, "layer_types", None)
        if layer_types and any(t != "full_attention" for t in layer_types):
            raise NotImplementedError(f"layer_types {set(layer_types)} not supported")
        rope = getattr(c, "rope_parameters", None) or {}
        if "rope_theta" not in rope and getattr(c, "rope_theta", None) is not None:
            rope = {"rope_type": "default", "rope_theta": c.rope_theta}
        rtype = rope.get("rope_type", rope.get("type", "default"))
        if rtype != "default":
            raise NotImplementedError(f"rope_type {rtype!r} not supported (default RoPE only)")
        n_layers = int(c.num_hidden_layers)
        n_heads = int(c.num_attention_heads)
        head_dim = getattr(c, "head_dim", None) or int(c.hidden_size) // n_heads
        kv = getattr(c, "num_key_value_heads", None) or n_heads
        if mt == "qwen3_moe":
            n_exp = int(c.num_experts)
            mlp_only = set(getattr(c, "mlp_only_layers", None) or [])
            step = int(getattr(c, "decoder_sparse_step", 1) or 1)
            moe_layers = tuple(
                (i not in mlp_only) and n_exp > 0 and (i + 1) % step == 0 for i in range(n_layers)
            )
            moe = dict(
                num_experts=n_exp,
                top_k=int(c.num_experts_per_tok),
                moe_intermediate_size=int(c.moe_intermediate_size),
                norm_topk_prob=bool(c.norm_topk_prob),
            )
        else:
            moe_layers = (False,) * n_layers
            moe = {}
        kw = dict(
            arch=mt,
            vocab_size=int(c.vocab_size),
            hidden_size=int(c.hidden_size),
            num_layers=n_layers,
            num_heads=n_heads,
            num_kv_heads=int(kv),
            head_dim=int(head_dim),
            intermediate_size=int(c.intermediate_size),
            rms_norm_eps=float(c.rms_norm_eps),
            rope_theta=float(rope.get("rope_theta", 10000.0)),
            tie_word_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
            attention_bias=bool(getattr(c, "attention_bias", False)),
            moe_layers=moe_layers,
            **moe,
        )
        kw.update(overrides)
        return cls(**kw)


class _AttrDict(dict):
    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


def _as_twin_config(config) -> TwinConfig:
    return config if isinstance(config, TwinConfig) else TwinConfig.from_hf(config)


# --------------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------------
def _jnp_dtype(dtype):
    if dtype is None:
        return None
    if not isinstance(dtype, str) and type(dtype).__module__.startswith("torch"):
        dtype = str(dtype).removeprefix("torch.")
    return jnp.dtype(dtype)


def _build_params(get, cfg: TwinConfig, dtype) -> dict:
    """``get(name) -> np.ndarray | None`` with transformers 5 state_dict names."""

    def arr(name, required=True):
        a = get(name)
        if a is None:
            if required:
                raise KeyError(f"weight {name!r} not found")
            return None
        return jnp.asarray(a, dtype=dtype)

    params = {
        "embed": arr("model.embed_tokens.weight"),
        "final_norm": arr("model.norm.weight"),
        "layers": [],
    }
    if not cfg.tie_word_embeddings:
        params["lm_head"] = arr("lm_head.weight")
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        lp = {
            "ln1": arr(p + "input_layernorm.weight"),
            "ln2": arr(p + "post_attention_layernorm.weight"),
            "wq": arr(a + "q_proj.weight"),
            "wk": arr(a + "k_proj.weight"),
            "wv": arr(a + "v_proj.weight"),
            "wo": arr(a + "o_proj.weight"),
            "q_norm": arr(a + "q_norm.weight"),
            "k_norm": arr(a + "k_norm.weight"),
        }
        if cfg.attention_bias:
            for n in ("q", "k", "v", "o"):
                b = arr(a + f"{n}_proj.bias", required=False)
                if b is not None:
                    lp[f"b{n}"] = b
        m = p + "mlp."
        if cfg.moe_layers[i]:
            lp["router"] = arr(m + "gate.weight")
            gu = get(m + "experts.gate_up_proj")
            if gu is not None:  # transformers 5 fused layout
                lp["w_gate_up"] = jnp.asarray(gu, dtype=dtype)
                lp["w_down"] = arr(m + "experts.down_proj")
            else:  # original per-expert checkpoint layout (what transformers 5 fuses on load)
                e = range(cfg.num_experts)
                gate = [get(m + f"experts.{j}.gate_proj.weight") for j in e]
                up = [get(m + f"experts.{j}.up_proj.weight") for j in e]
                down = [get(m + f"experts.{j}.down_proj.weight") for j in e]
                if any(x is None for x in gate + up + down):
                    raise KeyError(f"expert weights for layer {i} not found")
                lp["w_gate_up"] = jnp.asarray(
                    np.stack([np.concatenate([g, u], axis=0) for g, u in zip(gate, up)]), dtype=dtype
                )
                lp["w_down"] = jnp.asarray(np.stack(down), dtype=dtype)
        else:
            lp["w_gate"] = arr(m + "gate_proj.weight")
            lp["w_up"] = arr(m + "up_proj.weight")
            lp["w_down"] = arr(m + "down_proj.weight")
        params["layers"].append(lp)
    return params


def _torch_to_numpy(t):
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def params_from_torch(model, dtype=None, config: TwinConfig | None = None) -> dict:
    """Params pytree from a transformers ``Qwen3ForCausalLM``/``Qwen3MoeForCausalLM``.

    ``dtype``: jnp/np/torch dtype or name ("bfloat16", "float32"); ``None`` keeps each tensor's
    own dtype.  The torch weights are copied (via numpy), never modified.
    """
    cfg = config or TwinConfig.from_hf(model.config)
    sd = model.state_dict()
    return _build_params(lambda n: _torch_to_numpy(sd[n]) if n in sd else None, cfg, _jnp_dtype(dtype))


_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}  # fmt: skip


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
    """Memory-mapped reader (the safetensors numpy API cannot represent bfloat16)."""
    import ml_dtypes

    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = ml_dtypes.bfloat16 if info["dtype"] == "BF16" else _ST_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        out[name] = mm[b:e].view(dt).reshape(info["shape"])
    return out


def params_from_safetensors(path, config, dtype=None) -> dict:
    """Params from a ``.safetensors`` file, a sharded ``*.index.json`` or a checkpoint folder.

    Accepts both transformers 5's fused expert layout and the original per-expert layout.
    ``config``: a :class:`TwinConfig` or the transformers config.
    """
    cfg = _as_twin_config(config)
    path = os.fspath(path)
    if os.path.isdir(path):
        idx = os.path.join(path, "model.safetensors.index.json")
        path = idx if os.path.exists(idx) else os.path.join(path, "model.safetensors")
    if path.endswith(".json"):
        with open(path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        files = [os.path.join(os.path.dirname(path), x) for x in files]
    else:
        files = [path]
    tensors: dict[str, np.ndarray] = {}
    for fn in files:
        tensors.update(_read_safetensors(fn))
    return _build_params(tensors.get, cfg, _jnp_dtype(dtype))


def param_count(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------
def init_cache(config, batch: int, max_len: int, dtype=jnp.float32) -> dict:
    cfg = _as_twin_config(config)
    shape = (batch, max_len, cfg.num_kv_heads, cfg.head_dim)
    dt = _jnp_dtype(dtype)
    return {
        "k": [jnp.zeros(shape, dt) for _ in range(cfg.num_layers)],
        "v": [jnp.zeros(shape, dt) for _ in range(cfg.num_layers)],
    }


def _rms_norm(x, w, eps):
    # transformers: float32 normalise, cast back to the input dtype, then scale by the weight.
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return w * x32.astype(x.dtype)


def _linear(x, w, b=None):
    y = jnp.einsum("...i,oi->...o", x, w)
    return y if b is None else y + b


def _rope(cfg: TwinConfig, positions, dtype):
    """cos/sin [T, hd] for int positions [T], float32 like transformers, then cast."""
    hd = cfg.head_dim
    inv_freq = 1.0 / (np.float32(cfg.rope_theta) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)))
    freqs = positions.astype(jnp.float32)[:, None] * jnp.asarray(inv_freq, jnp.float32)[None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb).astype(dtype), jnp.sin(emb).astype(dtype)


def _apply_rope(x, cos, sin):  # x [B,T,N,hd], cos/sin [T,hd]
    half = x.shape[-1] // 2
    rot = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None, :, None, :] + rot * sin[None, :, None, :]


def _attention(cfg: TwinConfig, lp, x, cos, sin, k_cache, v_cache, start, decode: bool):
    """x [B,T,D]; writes T new keys at ``start``; returns (out [B,T,D], k_cache, v_cache)."""
    B, T, _ = x.shape
    H, KVH, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    G = H // KVH
    eps = cfg.rms_norm_eps
    q = _linear(x, lp["wq"], lp.get("bq")).reshape(B, T, H, hd)
    k = _linear(x, lp["wk"], lp.get("bk")).reshape(B, T, KVH, hd)
    v = _linear(x, lp["wv"], lp.get("bv")).reshape(B, T, KVH, hd)
    q = _apply_rope(_rms_norm(q, lp["q_norm"], eps), cos, sin)
    k = _apply_rope(_rms_norm(k, lp["k_norm"], eps), cos, sin)
    k_cache = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (0, start, 0, 0))
    v_cache = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (0, start, 0, 0))
    if decode:  # attend over the whole static cache, masked by position
        keys, vals = k_cache.astype(x.dtype), v_cache.astype(x.dtype)
        kpos = jnp.arange(keys.shape[1])
    else:  # prefill from position 0: only the prompt's own keys exist, so skip the empty cache
        keys, vals = k, v
        kpos = jnp.arange(T)
    qpos = start + jnp.arange(T)
    mask = kpos[None, :] <= qpos[:, None]  # [T,S] causal
    qg = q.reshape(B, T, KVH, G, hd)  # head h uses kv head h // G, as repeat_kv
    scores = jnp.einsum("btkgh,bskh->bkgts", qg, keys) * jnp.asarray(hd**-0.5, x.dtype)
    scores = jnp.where(mask, scores.astype(jnp.float32), -jnp.inf)
    probs = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    out = jnp.einsum("bkgts,bskh->btkgh", probs, vals).reshape(B, T, H * hd)
    return _linear(out, lp["wo"], lp.get("bo")), k_cache, v_cache


def _dense_mlp(lp, x):
    return _linear(jax.nn.silu(_linear(x, lp["w_gate"])) * _linear(x, lp["w_up"]), lp["w_down"])


def _ragged(lhs, rhs, group_sizes, tokamax_implementation: str | None = None):
    """lhs [M,K] sorted by group, rhs [E,N,K] (torch [out,in] layout) -> [M,N]; through Tokamax's
    ``tokamax_implementation`` when given, else jax.lax."""
    dn = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(((1,), (2,)), ((), ())),
        lhs_ragged_dimensions=(0,),
        rhs_group_dimensions=(0,),
    )
    if tokamax_implementation is None:
        return jax.lax.ragged_dot_general(lhs, rhs, group_sizes, dn)
    from tpubench.models.jax_experts import import_tokamax

    tokamax = import_tokamax()  # only when a tokamax formulation is traced: an optional extra
    # A one-element tuple: Tokamax tries that implementation only and raises if it cannot run,
    # where a longer sequence (or None) would fall back to the next one silently.
    return tokamax.ragged_dot_general(lhs, rhs, group_sizes, dn, implementation=(tokamax_implementation,))


def _moe(cfg: TwinConfig, lp, x, impl: str, table=None, offset=None):
    """The MoE block; returns (output [B,T,D], chosen experts [B*T,K])."""
    B, T, D = x.shape
    E, K, I = cfg.num_experts, cfg.top_k, cfg.moe_intermediate_size
    xf = x.reshape(B * T, D)
    logits = _linear(xf, lp["router"])  # [N,E] model dtype
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    if table is None:
        topv, topi = jax.lax.top_k(probs, K)  # [N,K]
    else:  # the scheduled experts win top-k (+2 > any probability); gates stay the router's own
        n = B * T
        scheduled = table[(offset + jnp.arange(n)) % table.shape[0]]
        bias = jnp.zeros_like(probs).at[jnp.arange(n)[:, None], scheduled].set(2.0)
        _, topi = jax.lax.top_k(probs + bias, K)
        topv = jnp.take_along_axis(probs, topi, axis=-1)
    if cfg.norm_topk_prob:
        topv = topv / jnp.sum(topv, axis=-1, keepdims=True)
    topv = topv.astype(x.dtype)
    wgu, wd = lp["w_gate_up"], lp["w_down"]  # [E,2I,D], [E,D,I]
    if impl == "gather":
        h = jnp.einsum("nd,nkfd->nkf", xf, wgu[topi])
        a = jax.nn.silu(h[..., :I]) * h[..., I:]
        y = jnp.einsum("nkf,nkdf->nkd", a, wd[topi])
        out = jnp.einsum("nkd,nk->nd", y, topv)
    elif impl == "dense":
        h = jnp.einsum("nd,efd->nef", xf, wgu)
        a = jax.nn.silu(h[..., :I]) * h[..., I:]
        y = jnp.einsum("nef,edf->ned", a, wd)
        w = jnp.zeros((B * T, E), x.dtype).at[jnp.arange(B * T)[:, None], topi].set(topv)
        out = jnp.einsum("ned,ne->nd", y, w)
    else:  # ragged / tokamax: grouped GEMM over (token, expert) pairs sorted by expert
        flat_e = topi.reshape(-1)
        order = jnp.argsort(flat_e, stable=True)
        group_sizes = jnp.bincount(flat_e, length=E).astype(jnp.int32)
        xs = xf[order // K]  # [N*K, D]
        kernel = cfg.tokamax_implementation if impl == "tokamax" else None
        h = _ragged(xs, wgu, group_sizes, kernel)
        a = jax.nn.silu(h[:, :I]) * h[:, I:]
        y = _ragged(a, wd, group_sizes, kernel)  # [N*K, D]
        y = y[jnp.argsort(order)].reshape(B * T, K, D)  # unsort (gather, not scatter)
        out = jnp.einsum("nkd,nk->nd", y, topv)
    return out.reshape(B, T, D), topi


def _forward(cfg: TwinConfig, params, ids, cache, start, decode: bool):
    x = params["embed"][ids]  # [B,T,D]
    dtype = x.dtype
    T = ids.shape[1]
    cos, sin = _rope(cfg, start + jnp.arange(T), dtype)
    moe_impl = cfg.moe_decode if decode else cfg.moe_prefill
    ks, vs = list(cache["k"]), list(cache["v"])
    # Token (row r, position p) is number B*p + r of the stream since the cache was emptied (the
    # prefill starts at 0, row-major): the index of its routing schedule, as in torch.
    offset = ids.shape[0] * start
    routes = []
    for i, lp in enumerate(params["layers"]):
        h = _rms_norm(x, lp["ln1"], cfg.rms_norm_eps)
        h, ks[i], vs[i] = _attention(cfg, lp, h, cos, sin, ks[i], vs[i], start, decode)
        x = x + h
        h = _rms_norm(x, lp["ln2"], cfg.rms_norm_eps)
        if cfg.moe_layers[i]:
            table = params["routing"][len(routes)] if cfg.routed else None
            h, chosen = _moe(cfg, lp, h, moe_impl, table, offset)
            routes.append(chosen)
            x = x + h
        else:
            x = x + _dense_mlp(lp, h)
    x = _rms_norm(x[:, -1], params["final_norm"], cfg.rms_norm_eps)
    head = params["embed"] if cfg.tie_word_embeddings else params["lm_head"]
    logits = _linear(x, head).astype(jnp.float32)
    if cfg.record_routes:
        return logits, {"k": ks, "v": vs}, jnp.stack(routes)
    return logits, {"k": ks, "v": vs}


def prefill(params, config: TwinConfig, input_ids, cache):
    """Run the prompt ``input_ids [B,I]`` (positions 0..I-1) into an empty ``cache``.

    Returns ``(logits of the last prompt token [B,V] float32, cache)``.
    """
    ids = jnp.asarray(input_ids, jnp.int32)
    return _forward(config, params, ids, cache, jnp.int32(0), decode=False)


def decode_step(params, config: TwinConfig, token, position, cache):
    """One token per row: ``token [B]`` at ``position`` (int32 scalar; = tokens already cached).

    Returns ``(logits [B,V] float32, cache)``.  ``position`` is traced, so one compile serves
    every step.
    """
    ids = jnp.asarray(token, jnp.int32)[:, None]
    return _forward(config, params, ids, cache, jnp.asarray(position, jnp.int32), decode=True)


def jitted(donate_cache: bool = True):
    """``(prefill_jit, decode_jit)``: jax.jit of the two steps with the config static and the
    cache donated (updated in place).  The pair is cached, so every caller shares one compile
    cache; ``decode_jit._cache_size()`` counts compiles.  Use ``.lower(...).compile()`` to time
    compilation apart from execution."""
    return _jitted(bool(donate_cache))


@functools.lru_cache(maxsize=None)
def _jitted(donate_cache: bool):
    return (
        jax.jit(prefill, static_argnums=(1,), donate_argnums=(3,) if donate_cache else ()),
        jax.jit(decode_step, static_argnums=(1,), donate_argnums=(4,) if donate_cache else ()),
    )


def greedy_generate(
    params, cfg, ids, steps: int, *, max_len: int | None = None, return_logits: bool = False,
    forced_tokens=None,
):  # fmt: skip
    """Greedy decode ``steps`` new tokens after prompt ``ids [B,I]`` (EOS ignored).

    Token 0 comes from prefill, tokens 1..steps-1 from ``steps-1`` decode steps, all at static
    shapes (cache of ``max_len``, default I+steps).  Returns an int array ``[B, steps]`` (and the
    float32 logits ``[steps, B, V]`` when ``return_logits``).  ``forced_tokens [B, steps]``
    (teacher forcing) feeds those tokens instead of the argmax, so logits can be compared with
    another backend even where a near-tie makes the greedy paths split.
    """
    cfg = _as_twin_config(cfg)
    ids = np.asarray(ids, np.int32)
    B, I = ids.shape
    max_len = max_len or I + steps
    if max_len < I + steps - 1:
        raise ValueError(f"max_len {max_len} < prompt {I} + decode steps {steps - 1}")
    forced = None if forced_tokens is None else np.asarray(forced_tokens, np.int32)
    pf, dec = jitted()
    cache = init_cache(cfg, B, max_len, params["embed"].dtype)
    logits, cache = pf(params, cfg, ids, cache)
    all_logits = [logits]
    toks = [jnp.argmax(logits, axis=-1).astype(jnp.int32)]
    for s in range(steps - 1):
        feed = toks[-1] if forced is None else jnp.asarray(forced[:, s])
        logits, cache = dec(params, cfg, feed, jnp.int32(I + s), cache)
        toks.append(jnp.argmax(logits, axis=-1).astype(jnp.int32))
        all_logits.append(logits)
    out = np.stack([np.asarray(t) for t in toks], axis=1)
    if return_logits:
        return out, np.stack([np.asarray(x) for x in all_logits])
    return out


def with_routing(params, config, tables):
    """``(params, config)`` that route by schedule ``tables`` ([MoE layers, P, k], models/routing.py)."""
    cfg = dataclasses.replace(_as_twin_config(config), routed=True)
    return {**params, "routing": [jnp.asarray(t, jnp.int32) for t in tables]}, cfg


def route_trace(params, config, ids, steps: int, *, max_len: int | None = None) -> list[np.ndarray]:
    """The experts chosen at every step of a greedy generation of ``steps`` tokens after ``ids``:
    one int array ``[MoE layers, tokens, k]`` per forward call (the prefill's first). A pass of
    its own (compiled apart), so timed executables carry no extra output."""
    cfg = dataclasses.replace(_as_twin_config(config), record_routes=True)
    ids = np.asarray(ids, np.int32)
    B, I = ids.shape
    pf, dec = jax.jit(prefill, static_argnums=(1,)), jax.jit(decode_step, static_argnums=(1,))
    cache = init_cache(cfg, B, max_len or I + steps, params["embed"].dtype)
    logits, cache, chosen = pf(params, cfg, ids, cache)
    out = [np.asarray(chosen)]
    for s in range(steps - 1):
        token = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        logits, cache, chosen = dec(params, cfg, token, jnp.int32(I + s), cache)
        out.append(np.asarray(chosen))
    return out


def jax_device_info() -> dict:
    devs = jax.devices()
    return dict(platform=jax.default_backend(), device_kind=devs[0].device_kind, count=len(devs))

"""MoE routing control and per-expert load: the routing schedules and the load statistics.

Pure numpy, shared by the torch model (models/torch_routing.py) and the JAX twin, so both pick
the very same experts for the same token.

Routing control (`model.routing`, docs/workloads.md#routing) biases the router's selection, not
the model's code: the model's own router computes its logits and probabilities, then a bias added
to the probabilities (+2, above any probability, so the same as +inf on the logits) makes top-k
pick the scheduled experts, while the gate values stay the router's own probabilities of those
experts (renormalised where the router renormalises). This is how DeepSeek-V3's selection bias
works, and it keeps the experts' compute, the weights and the kernels exactly the model's.

Which experts a token gets is a *schedule*: a table [P, k] per MoE layer, indexed by the token's
position in the stream the layer has seen since the KV cache was emptied (prefill tokens in
row-major order, then B tokens per decode step, so token (row r, position p) of a decode step has
index B*p + r in both frameworks), modulo its period P.

- `uniform`: round robin, token i takes experts (i*k + j) mod E for j < k. Over any N consecutive
  tokens every expert gets floor or ceil of N*k/E assignments, so max/mean load is within
  E/(N*k) of 1 (exactly 1 when E divides N*k): a deterministic balance, where random uniform
  choices would leave max/mean ~1.3 at a few thousand tokens on 128 experts. Each decode step
  spreads over min(E, B*k) distinct experts, the most any routing can touch.
- `skewed` (Zipf exponent s): expert e (e = 0 hottest) has weight 1/(e+1)^s; each token draws k
  distinct experts by those weights (Gumbel top-k, seeded per layer).
- `hot` (n experts, share p): experts 0..n-1 are the hot set (contiguous, so one expert-parallel
  rank holds them: the "hot rank" case) and take a share p of all assignments, exactly over a
  period: slot q of the stream is hot when floor((q+1)p) > floor(qp); hot and cold slots each go
  round robin over their set. Needs p*k <= n and (1-p)*k <= E-n (a token's k experts are distinct).
- `trace`: per-layer histograms (counts or shares per expert) drawn like `skewed`; one histogram
  is used for every layer. A tpubench result's `moe.expert_load` is such a file's `layers`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tpubench.errors import UserError
from tpubench.workload_spec.point import routing_label

# Schedule period in tokens: long enough that a decode of a few thousand tokens does not repeat
# (the load statistics are over the tokens actually run), small enough to live on the device.
PERIOD = 4096
NATURAL = "natural"
_FIELD = "model.routing"


# ----------------------------------------------------------------------------- the spec


def kind(routing: Any) -> str:
    return routing if isinstance(routing, str) else next(iter(routing))


def label(routing: Any) -> str:
    """Short words for labels and tables: 'uniform', 'zipf1.2', 'hot4@0.5', 'trace:file.json'."""
    return routing_label(routing)


# ----------------------------------------------------------------------------- schedules


def schedule(routing: Any, n_layers: int, n_experts: int, top_k: int, seed: int = 0,
             period: int = PERIOD) -> np.ndarray | None:
    """The expert table [n_layers, period, top_k] (int32) of a routing, or None for `natural`.
    A routing the model cannot follow is a UserError on model.routing."""
    k = kind(routing)
    if k == NATURAL:
        return None
    if top_k > n_experts or top_k < 1:
        raise UserError(f"top-k {top_k} does not fit {n_experts} experts", field=_FIELD)
    if k == "uniform":
        table = _round_robin(period, n_experts, top_k)
        return np.broadcast_to(table, (n_layers, period, top_k)).astype(np.int32)
    body = routing[k]
    if k == "skewed":
        weights = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** float(body["zipf"])
        return np.stack([_weighted(weights, period, top_k, _layer_rng(seed, i)) for i in range(n_layers)])
    if k == "hot":
        table = _hot(int(body["experts"]), float(body["share"]), period, n_experts, top_k)
        return np.broadcast_to(table, (n_layers, period, top_k)).astype(np.int32)
    if k == "trace":
        layers = body["layers"]
        where = f"{_FIELD}.trace ({body['file']})"
        if len(layers) not in (1, n_layers):
            raise UserError(f"the trace has {len(layers)} layer histograms; the model has {n_layers} MoE layers "
                            "(give one per MoE layer, or one for all)", field=where)
        if len(layers[0]) != n_experts:
            raise UserError(f"the trace has {len(layers[0])} experts per layer; the model has {n_experts}",
                            field=where)
        rows = layers if len(layers) == n_layers else layers * n_layers
        return np.stack([_weighted(np.asarray(r, np.float64), period, top_k, _layer_rng(seed, i))
                         for i, r in enumerate(rows)])
    raise UserError(f"unknown routing {k!r}", field=_FIELD)


def _layer_rng(seed: int, layer: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), 20, int(layer)])


def _round_robin(period: int, n_experts: int, top_k: int) -> np.ndarray:
    slots = np.arange(period, dtype=np.int64)[:, None] * top_k + np.arange(top_k)[None, :]
    return (slots % n_experts).astype(np.int32)


def _weighted(weights: np.ndarray, period: int, top_k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct experts per token, drawn without replacement in proportion to `weights` (Gumbel
    top-k). An expert of weight 0 is never drawn unless fewer than k have weight."""
    logw = np.where(weights > 0, np.log(np.maximum(weights, 1e-300)), -1e30)
    keys = logw[None, :] + rng.gumbel(size=(period, weights.size))
    return np.argsort(-keys, axis=1, kind="stable")[:, :top_k].astype(np.int32)


def _hot(n_hot: int, share: float, period: int, n_experts: int, top_k: int) -> np.ndarray:
    if not 0 < n_hot < n_experts:
        raise UserError(f"hot experts must be between 1 and {n_experts - 1} (the model has {n_experts})",
                        field=f"{_FIELD}.hot.experts")
    if share * top_k > n_hot + 1e-9:
        raise UserError(f"a share of {share:g} needs {share * top_k:g} of each token's {top_k} experts in the hot "
                        f"set, which has only {n_hot} (a token's experts are distinct): at most {n_hot / top_k:g}",
                        field=f"{_FIELD}.hot.share")
    if (1 - share) * top_k > n_experts - n_hot + 1e-9:
        raise UserError(f"a share of {share:g} leaves {(1 - share) * top_k:g} of each token's experts to the "
                        f"{n_experts - n_hot} cold experts: at least {1 - (n_experts - n_hot) / top_k:g}",
                        field=f"{_FIELD}.hot.share")
    table = np.empty((period, top_k), np.int32)
    cold = n_experts - n_hot
    for t in range(period):
        q0 = t * top_k
        hot_before = math.floor(q0 * share + 1e-9)
        hot_here = math.floor((q0 + top_k) * share + 1e-9) - hot_before
        cold_before = q0 - hot_before
        row = [(hot_before + j) % n_hot for j in range(hot_here)]
        row += [n_hot + (cold_before + j) % cold for j in range(top_k - hot_here)]
        table[t] = row
    return table


# ----------------------------------------------------------------------------- load statistics


def expert_load(steps: Sequence[np.ndarray], n_experts: int, iterations: int = 1) -> dict[str, Any]:
    """Per-expert load of a run from the experts every step chose.

    `steps`: one int array [n_moe_layers, tokens, k] per forward call of one iteration (step 0 the
    prefill, the rest decode steps); the timed region ran `iterations` identical iterations (the
    same prompt, greedy), so its counts are one iteration's times `iterations`.

    Returns counts per layer ([L][E], over the timed region), the imbalance (max load / mean load)
    per layer and over all layers (mean of the layers' and the worst layer's), the same over the
    decode steps only, and the distinct experts per decode step (per layer, and their mean).
    """
    if not steps:
        return {}
    n_layers = steps[0].shape[0]
    counts = np.zeros((n_layers, n_experts), np.int64)
    decode_counts = np.zeros_like(counts)
    distinct = np.zeros(n_layers)
    for s, chosen in enumerate(steps):
        for layer in range(n_layers):
            hist = np.bincount(np.asarray(chosen[layer]).reshape(-1), minlength=n_experts)
            counts[layer] += hist
            if s > 0:
                decode_counts[layer] += hist
                distinct[layer] += np.count_nonzero(hist)
    n_decode = len(steps) - 1
    out: dict[str, Any] = {
        "n_experts": n_experts,
        "iterations": iterations,
        "expert_load": (counts * iterations).tolist(),
        "imbalance_per_layer": _imbalance(counts).tolist(),
    }
    imb = _imbalance(counts)
    out["expert_load_imbalance"] = float(imb.mean())
    out["expert_load_imbalance_max"] = float(imb.max())
    if n_decode:
        per_layer = distinct / n_decode
        d_imb = _imbalance(decode_counts)
        out.update({
            "decode_expert_load_imbalance": float(d_imb.mean()),
            "distinct_experts_per_decode_step_per_layer": per_layer.tolist(),
            "distinct_experts_per_decode_step": float(per_layer.mean()),
        })
    return out


def load_from_counts(per_layer: Sequence[Sequence[int]], repeats: int, iterations: int) -> dict[str, Any]:
    """Per-expert load of a run from the tokens each expert got per MoE layer in one recorded pass
    that the timed region repeated `repeats` times (training: its micro-batches per step x steps,
    `iterations` the steps), and the imbalance, as `expert_load` gives them."""
    counts = np.asarray(per_layer, dtype=np.int64)
    imb = _imbalance(counts)
    return {"n_experts": int(counts.shape[1]), "iterations": iterations,
            "expert_load": (counts * repeats).tolist(), "imbalance_per_layer": imb.tolist(),
            "expert_load_imbalance": float(np.nanmean(imb)), "expert_load_imbalance_max": float(np.nanmax(imb))}


def _imbalance(counts: np.ndarray) -> np.ndarray:
    """max / mean load per layer (1 = perfectly balanced); nan for a layer that saw no token."""
    mean = counts.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mean > 0, counts.max(axis=1) / np.where(mean > 0, mean, 1), np.nan)


# The flat metrics (RunResult.metrics) a load summary gives: names without units, ratios and counts.
LOAD_METRICS = ("expert_load_imbalance", "expert_load_imbalance_max", "decode_expert_load_imbalance",
                "distinct_experts_per_decode_step")


def load_metrics(load: dict) -> dict[str, float]:
    return {k: load[k] for k in LOAD_METRICS if k in load}

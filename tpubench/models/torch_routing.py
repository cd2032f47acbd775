"""MoE routing control and route recording on a transformers model, by forward hooks on its routers.

The model's own MoE code runs unchanged: a hook on each router module (the `mlp.gate` of Qwen3-MoE,
Mixtral, OLMoE, Qwen2-MoE; `router` of Gemma 4) takes the router's output (its logits or
probabilities, gate values and chosen experts) and, under a routing schedule (models/routing.py),
re-selects with a bias of +2 on the probabilities of the scheduled experts (what +inf on their
logits does), keeping the router's own rule for the gate values: its probabilities of the chosen
experts, renormalised where the router renormalises, times Gemma 4's per-expert scale.

Recording only reads the chosen experts the router (or the routing hook) returned; it runs in a
separate, untimed pass (see scenarios/generate/measure.py) so the timed loop carries no hook of it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from tpubench.errors import UserError


@dataclass(frozen=True)
class RouterRule:
    first_output: str       # "logits" or "probs": what the router returns first
    normalise: str | bool   # True, False, or the router's attribute that says (norm_topk_prob)
    expert_scale: str | None = None   # a per-expert scale parameter the gate values are multiplied by


# The routers whose rule tpubench knows (transformers 5.24's modeling files), by class name.
_RULES = {
    "Qwen3MoeTopKRouter": RouterRule("logits", "norm_topk_prob"),
    "Qwen2MoeTopKRouter": RouterRule("logits", "norm_topk_prob"),
    "OlmoeTopKRouter": RouterRule("logits", "norm_topk_prob"),
    "MixtralTopKRouter": RouterRule("logits", True),
    "Gemma4TextRouter": RouterRule("probs", True, "per_expert_scale"),
}


def routers(model) -> list:
    """The model's router modules, in layer order: modules named like a router that return the
    chosen experts (an integer tensor [tokens, k]) in their output."""
    found = []
    for module in model.modules():
        cls = type(module).__name__
        if cls in _RULES or (cls.lower().endswith("router") and hasattr(module, "top_k")):
            found.append(module)
    return found


def experts_of(router) -> tuple[int, int]:
    """(experts, top-k) of a router."""
    if type(router).__name__ == "Gemma4TextRouter":
        return int(router.config.num_experts), int(router.config.top_k_experts)
    return int(router.num_experts), int(router.top_k)


def model_experts(model) -> tuple[int, int, int] | None:
    """(MoE layers, experts, top-k) of a model, or None for a dense model."""
    found = routers(model)
    if not found:
        return None
    return (len(found), *experts_of(found[0]))


def _chosen(output):
    """The chosen-experts tensor of a router's output."""
    import torch

    for item in output if isinstance(output, tuple) else (output,):
        if isinstance(item, torch.Tensor) and not item.is_floating_point() and item.dim() == 2:
            return item
    raise RuntimeError(f"router output has no chosen-experts tensor: {type(output).__name__}")


class _Routing:
    """One router's routing hook: its schedule table and the count of tokens it has routed since
    `reset` (a device tensor, so compiled graphs keep it as state instead of guarding on a number)."""

    def __init__(self, router, table: np.ndarray, rule: RouterRule):
        import torch

        device = router.weight.device if hasattr(router, "weight") else next(router.parameters()).device
        self.rule = rule
        self.table = torch.as_tensor(table, dtype=torch.long, device=device)
        self.seen = torch.zeros((), dtype=torch.long, device=device)

    def __call__(self, module, args, output):
        import torch

        first, scores, _ = output
        n = first.shape[0]
        idx = (self.seen + torch.arange(n, device=first.device)) % self.table.shape[0]
        scheduled = self.table[idx]                                    # [n, k]
        self.seen.add_(n)
        probs = first.float() if self.rule.first_output == "probs" else torch.softmax(first.float(), dim=-1)
        bias = torch.zeros_like(probs).scatter_(1, scheduled, 2.0)
        _, chosen = torch.topk(probs + bias, scheduled.shape[1], dim=-1)
        gates = probs.gather(1, chosen)
        norm = self.rule.normalise if isinstance(self.rule.normalise, bool) else getattr(module, self.rule.normalise)
        if norm:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        if self.rule.expert_scale:
            gates = gates * getattr(module, self.rule.expert_scale)[chosen]
        return first, gates.to(scores.dtype), chosen

    def reset(self) -> None:
        self.seen.zero_()


class RoutingControl:
    """Routing hooks installed on a model's routers (a schedule from models/routing.py); `reset`
    with the KV cache, `remove` when the point is done."""

    def __init__(self, model, table: np.ndarray, family: str):
        found = routers(model)
        if len(found) != table.shape[0]:
            raise RuntimeError(f"schedule for {table.shape[0]} MoE layers, model has {len(found)}")
        self.hooks, self.handles = [], []
        for router, layer_table in zip(found, table):
            rule = _RULES.get(type(router).__name__)
            if rule is None:
                raise UserError(f"routing control does not know the router of {family} "
                                f"({type(router).__name__}); use routing: natural",
                                field="model.routing")
            hook = _Routing(router, layer_table, rule)
            self.hooks.append(hook)
            self.handles.append(router.register_forward_hook(hook))

    def reset(self) -> None:
        for hook in self.hooks:
            hook.reset()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def install_routing(model, routing, family: str, seed: int) -> RoutingControl | None:
    """The point's routing on the model's routers; None for `natural` or a dense model."""
    from tpubench.models.routing import kind, schedule

    if kind(routing) == "natural":
        return None
    shape = model_experts(model)
    if shape is None:
        raise UserError(f"routing {kind(routing)} needs a mixture-of-experts model; {family} has no router",
                        field="model.routing")
    layers, n_experts, top_k = shape
    return RoutingControl(model, schedule(routing, layers, n_experts, top_k, seed), family)


@contextlib.contextmanager
def recorded_routes(model):
    """Record the experts every router chooses while the block runs. Yields a list that, after the
    block, holds one int array [MoE layers, tokens, k] per forward call of the model."""
    found = routers(model)
    calls: list = []
    steps: list[np.ndarray] = []

    def record(module, args, output):
        calls.append(_chosen(output).detach())

    handles = [r.register_forward_hook(record) for r in found]
    try:
        yield steps
    finally:
        for h in handles:
            h.remove()
    n = len(found)
    for start in range(0, len(calls) - n + 1, n):
        steps.append(np.stack([c.cpu().numpy() for c in calls[start:start + n]]))

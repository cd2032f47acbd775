"""The quality gate of a quantised point: the quantised model against the unquantised one, on the
same weights and the same prompt.

The reference model continues the prompt greedily for `steps` tokens; both models then score that
one sequence (teacher forcing: one forward pass each, so a single early disagreement cannot send
the two down different paths and make everything after it incomparable). Per scored position:
the KL divergence of the quantised next-token distribution from the reference's (nats), and
whether the two greedy tokens agree. A point whose mean KL is above the workload's
`model.quality.max_mean_kl`, or whose agreement is below `min_token_agreement`, is invalid: a
faster model that computes something else must never be the cheapest.

`compare_logits` is pure numpy (tested on hand-computed cases); `reference_logits` and
`quantized_logits` run the models.
"""

from __future__ import annotations

import math

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def compare_logits(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """{mean_kl, max_kl, token_agreement, positions, max_abs_logit_delta, reference_logits_std} of
    two [positions, vocab] logit arrays scored on the same tokens."""
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape or ref.ndim != 2 or not ref.size:
        raise ValueError(f"need two equal [positions, vocab] arrays, got {ref.shape} and {cand.shape}")
    p, q = log_softmax(ref), log_softmax(cand)
    kl = (np.exp(p) * (p - q)).sum(axis=-1)
    agree = ref.argmax(axis=-1) == cand.argmax(axis=-1)
    return {"mean_kl": float(kl.mean()), "max_kl": float(kl.max()), "token_agreement": float(agree.mean()),
            "positions": int(ref.shape[0]), "max_abs_logit_delta": float(np.abs(ref - cand).max()),
            "reference_logits_std": float(ref.std())}


def verdict(figures: dict, gate: dict) -> list[str]:
    """The gate's reasons to call the point invalid (empty: within tolerance). A NaN fails."""
    reasons = []
    kl, agreement = figures.get("mean_kl", math.nan), figures.get("token_agreement", math.nan)
    if not kl <= gate["max_mean_kl"]:
        reasons.append(f"quantised model strays from the unquantised one: mean KL {kl:.3g} nats > "
                       f"{gate['max_mean_kl']:.3g} (model.quality.max_mean_kl)")
    if not agreement >= gate["min_token_agreement"]:
        reasons.append(f"quantised model's greedy tokens agree with the unquantised one's on {agreement:.0%} "
                       f"< {gate['min_token_agreement']:.0%} (model.quality.min_token_agreement)")
    return reasons


def gate_prompt(seed: int, length: int, vocab: int) -> np.ndarray:
    """The prompt both models score: one sequence drawn from the seed, apart from the timed prompts."""
    rng = np.random.default_rng([seed, 0x9A7E])
    return rng.integers(0, vocab, size=(1, length), dtype=np.int64)


def reference_logits(model, prompt: np.ndarray, steps: int, device) -> tuple[np.ndarray, np.ndarray]:
    """(the scored sequence [1, L + steps], the reference's logits at its last `steps` positions
    [steps, vocab]) from the unquantised `model`."""
    import torch

    ids = torch.as_tensor(prompt, device=device)
    with torch.no_grad():
        sequence = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps, do_sample=False,
                                  min_new_tokens=steps, pad_token_id=0)
        return sequence.cpu().numpy(), _scored(model, sequence, prompt.shape[1])


def quantized_logits(model, sequence: np.ndarray, prompt_length: int, device) -> np.ndarray:
    import torch

    with torch.no_grad():
        return _scored(model, torch.as_tensor(sequence, device=device), prompt_length)


def _scored(model, sequence, prompt_length: int) -> np.ndarray:
    """Logits predicting each generated token (positions prompt_length - 1 .. end - 1), float32 on the host."""
    logits = model(sequence).logits[0, prompt_length - 1: -1]
    return logits.float().cpu().numpy()

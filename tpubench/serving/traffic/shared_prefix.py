"""Traffic mode `shared_prefix`: synthetic prompts with explicit prefix sharing, as vLLM's
`prefix_repetition` dataset (prefix_len, suffix_len, num_prefixes) and AIPerf's shared system
prompts do.

`num_prefixes` prefixes of `prefix_length` tokens are drawn for the point; each request draws
whether it uses one (a share `prefix_share` of the requests, seeded) and which (uniformly), then
gets a question of `suffix_length` tokens of its own. A request that uses no shared prefix gets a
prefix of its own of the same length, so every prompt is prefix_length + suffix_length tokens and
only the sharing differs between a run with sharing and one without. On /v1/completions the prompt
is prefix + question (token for token the shared prefix, see common.py); on chat, the prefix is
the system message and the question the user message.
"""

from __future__ import annotations

from tpubench.serving.traffic.common import (
    STREAM_PREFIX,
    STREAM_SHARE,
    STREAM_SUFFIX,
    RequestSpec,
    TrafficPlan,
    Vocabulary,
    warmup_specs,
)

# The key of a request's own (unshared) prefix, apart from the shared prefixes' 0..num_prefixes-1.
_OWN = 1 << 32


def plan(cfg: dict, *, n: int, warmup: int, seed: int, vocab: Vocabulary, output_length: int,
         chat: bool) -> TrafficPlan:
    num, plen, slen = cfg["num_prefixes"], cfg["prefix_length"], cfg["suffix_length"]
    share = cfg.get("prefix_share", 1.0)
    import numpy as np  # here, not at the top: `validate` imports this module but plans nothing

    rng = np.random.default_rng([seed, STREAM_SHARE])
    uses = rng.random(n) < share
    which = rng.integers(0, num, size=n)
    prefixes = [vocab.words_for(plen, seed, STREAM_PREFIX, j) for j in range(num)]
    specs = []
    for k in range(n):
        prefix = prefixes[which[k]] if uses[k] else vocab.words_for(plen, seed, STREAM_PREFIX, _OWN + k)
        # A completions prompt's special tokens come out of the question, so the prefix stays whole.
        q_len = slen if chat else max(1, slen - vocab.special_tokens)
        question = vocab.words_for(q_len, seed, STREAM_SUFFIX, k)
        if chat:
            specs.append(RequestSpec("", 0, output_length, messages=(
                {"role": "system", "content": " ".join(prefix)}, {"role": "user", "content": " ".join(question)})))
        else:
            # plen + slen, unless a question shorter than the special tokens kept its one word.
            length = plen + q_len + vocab.special_tokens
            specs.append(RequestSpec(" ".join(prefix + question), length if vocab.exact else 0, output_length))
    used = int(uses.sum())
    return TrafficPlan(
        label=f"shared-prefix {num}x{plen}+{slen} share {share:g}", specs=specs, exact_prompt_lengths=vocab.exact and not chat,
        warmup=warmup_specs(vocab, warmup, plen + slen, output_length, seed, chat=chat),
        summary={"mode": "shared_prefix", "num_prefixes": num, "prefix_length": plen, "suffix_length": slen,
                 "prefix_share": share, "requests_sharing": used,
                 "shared_prompt_tokens": used * plen, "prompt_tokens": n * (plen + slen)})

"""Is the server computing the model? Greedy completions with logprobs on a few fixed prompts, asked
of the server and compared with transformers on the same weights (docs/scenarios/serve.md).

A server can be fast because it serves something else: another checkpoint, a broken kernel, a
quantisation nobody asked for. For a model whose weights tpubench has (one it built, or a local
folder), the check sends CHECK_PROMPTS prompts of CHECK_PROMPT_TOKENS tokens to /v1/completions
(not streamed, temperature 0, `logprobs`, and vLLM's `prompt_logprobs` and
`return_tokens_as_token_ids` where the server takes them), then runs the reference, transformers on
the CPU in float32, once over prompt + the server's tokens (teacher forcing, so a near-tie that
sends the two greedy paths apart is not a mismatch) and compares:

- every log-probability the server gave (its chosen tokens' and, with prompt_logprobs, the
  prompt's) with the reference's of the same token: |delta| <= tolerance;
- every token the server chose is the reference's greedy one or within the tolerance of it.

The tolerance is `compare --numerics`'s (measure/numerics.py) for the served dtype: float32 on both
sides FP32_ABS_TOL, else HALF_REL_TOL x the std of the reference's logits; doubled for a
log-probability, which moves by at most twice its logits' largest change (the logit and the
log-sum-exp). A server that gives no logprobs (transformers serve) is checked on its greedy tokens
alone, and the verdict says so.

Returns a JSON-ready dict: status "pass" | "fail" | "skipped", detail (one line), and the figures.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from tpubench.models.library_noise import quiet_library_noise

# transformers, imported where a model is built, imports torchao: its unactionable log lines go.
quiet_library_noise()

# tolerance(dtype_a, dtype_b, logits_std) -> (max |delta logit|, all tokens must match): `compare
# --numerics`'s (measure/numerics.py), handed in by the scenario (serving does not import measure).
Tolerance = Callable[[str, str, float], tuple[float, bool]]

CHECK_PROMPTS = 3
CHECK_PROMPT_TOKENS = 12
CHECK_NEW_TOKENS = 6
CHECK_TIMEOUT_S = 120.0
_SEEDS = (7001, 7002, 7003, 7004, 7005)


@dataclass
class ServerAnswer:
    """One greedy completion as the server gave it: token ids it generated, their logprobs (None
    without), and {position: {token id: logprob}} of the prompt (empty without)."""

    tokens: list[int]
    token_logprobs: list[float] | None
    prompt_logprobs: dict[int, dict[int, float]]


def served_dtype(command: list[str] | None, stack: str, model_dtype: str) -> str:
    """The dtype the server computes in: its `--dtype` where the command gives one; transformers
    serve loads the checkpoint's; vLLM's "auto" narrows a float32 checkpoint to 16 bits."""
    argv = [str(a) for a in command or []]
    for i, arg in enumerate(argv):
        if arg == "--dtype" and i + 1 < len(argv):
            given = argv[i + 1]
            return {"float": "float32", "half": "float16"}.get(given, given) if given != "auto" else \
                served_dtype(None, stack, model_dtype)
        if arg.startswith("--dtype="):
            return served_dtype([*argv[:i], "--dtype", arg.split("=", 1)[1]], stack, model_dtype)
    if stack.startswith("vllm") and model_dtype == "float32":
        return "bfloat16"
    return model_dtype


def check_served_model(base_url: str, model: str, weights: str, *, dtype: str, tolerance: Tolerance,
                       prompts: int = CHECK_PROMPTS, prompt_tokens: int = CHECK_PROMPT_TOKENS,
                       new_tokens: int = CHECK_NEW_TOKENS) -> dict:
    """The verdict of the module docstring for the server at `base_url` serving `model` (its name
    in requests), whose weights should be those in the local folder `weights`; `dtype`: what the
    server computes in (served_dtype); `tolerance`: measure.numerics.tolerance."""
    from tpubench.serving.demo_model import load_tokenizer, prompt_of_length

    tokenizer = load_tokenizer(weights)
    texts = [prompt_of_length(tokenizer, prompt_tokens, seed) for seed in _SEEDS[:prompts]]
    answers = []
    for text in texts:
        try:
            answers.append(ask_server(base_url, model, text, new_tokens, tokenizer))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            return {"status": "fail", "detail": f"the server did not answer the check's greedy completion: {exc}"}
    reference = _reference(weights)
    return compare(reference, tokenizer, texts, answers, dtype=dtype, tolerance=tolerance)


def ask_server(base_url: str, model: str, prompt: str, new_tokens: int, tokenizer) -> ServerAnswer:
    """A greedy completion with logprobs; vLLM's extra fields are dropped when refused (HTTP 400/422)."""
    body = {"model": model, "prompt": prompt, "max_tokens": new_tokens, "temperature": 0, "logprobs": 1,
            "stream": False, "prompt_logprobs": 1, "return_tokens_as_token_ids": True}
    status, data = _post_json(f"{base_url}/v1/completions", body)
    if status in (400, 422):
        for key in ("prompt_logprobs", "return_tokens_as_token_ids", "logprobs"):
            body.pop(key, None)
            status, data = _post_json(f"{base_url}/v1/completions", body)
            if status == 200:
                break
    if status != 200:
        raise ValueError(f"HTTP {status}: {str(data)[:200]}")
    choice = data["choices"][0]
    lp = choice.get("logprobs") or {}
    tokens = None
    if lp.get("tokens"):
        try:
            tokens = [_token_id(t, tokenizer) for t in lp["tokens"]]
            logprobs = [float(x) for x in lp.get("token_logprobs") or []] or None
        except ValueError:
            # Token texts that are not one token each (a server without return_tokens_as_token_ids,
            # a byte-level piece): say nothing of the model; check the text's tokens, as without logprobs.
            tokens = None
    if tokens is None:
        tokens = tokenizer(choice.get("text") or "", add_special_tokens=False)["input_ids"]
        logprobs = None
    prompt_lp: dict[int, dict[int, float]] = {}
    for pos, entry in enumerate(choice.get("prompt_logprobs") or data.get("prompt_logprobs") or []):
        if isinstance(entry, dict):
            prompt_lp[pos] = {int(k): float(v["logprob"] if isinstance(v, dict) else v) for k, v in entry.items()}
    return ServerAnswer(tokens, logprobs, prompt_lp)


def _token_id(token: str, tokenizer) -> int:
    """vLLM's "token_id:N" (return_tokens_as_token_ids), else the token's text as one id."""
    if token.startswith("token_id:"):
        return int(token.split(":", 1)[1])
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"the server's token {token!r} is not one token of the model's tokenizer")
    return ids[0]


def _reference(weights: str):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)
    model.eval()
    return model


def compare(reference, tokenizer, texts: list[str], answers: list[ServerAnswer], *, dtype: str,
            tolerance: Tolerance) -> dict:
    """The verdict over every prompt (module docstring); `reference` is a transformers causal LM."""
    import torch

    deltas: list[float] = []
    greedy_gaps: list[float] = []
    stds: list[float] = []
    positions = prompt_positions = 0
    for text, answer in zip(texts, answers):
        prompt_ids = tokenizer(text)["input_ids"]
        ids = torch.tensor([prompt_ids + list(answer.tokens)])
        with torch.no_grad():
            logits = reference(ids).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        stds.append(float(logits[len(prompt_ids) - 1].std()))
        for k, token in enumerate(answer.tokens):
            row = logprobs[len(prompt_ids) - 1 + k]
            greedy_gaps.append(float(row.max() - row[token]))
            if answer.token_logprobs is not None and k < len(answer.token_logprobs):
                deltas.append(abs(float(row[token]) - answer.token_logprobs[k]))
            positions += 1
        for pos, given in answer.prompt_logprobs.items():
            if pos == 0 or pos >= len(prompt_ids):
                continue
            for token, value in given.items():
                if math.isfinite(value):
                    deltas.append(abs(float(logprobs[pos - 1][token]) - value))
                    prompt_positions += 1
    std = float(sum(stds) / len(stds)) if stds else 0.0
    tol, _ = tolerance("float32", dtype, std)
    lp_tol = 2 * tol
    worst = max(deltas) if deltas else math.nan
    gap = max(greedy_gaps) if greedy_gaps else math.nan
    problems = []
    if deltas and worst > lp_tol:
        problems.append(f"max |delta logprob| {worst:.3g} > {lp_tol:.3g}")
    if greedy_gaps and gap > lp_tol:
        off = sum(1 for g in greedy_gaps if g > lp_tol)
        problems.append(f"{off} of {len(greedy_gaps)} generated tokens are not the reference's greedy choice "
                        f"(worst {gap:.3g} below it)")
    if not positions:
        problems.append("the server generated no token")
    what = (f"{len(answers)} prompts, {positions} generated tokens" +
            (f", {prompt_positions} prompt logprobs" if prompt_positions else "") +
            (", logprobs" if deltas else ", tokens only: the server gives no logprobs") +
            f"; served dtype {dtype}, tolerance {lp_tol:.3g}")
    detail = ("the server computes a different model: " + "; ".join(problems) + f" ({what})") if problems else \
        ("matches transformers on the same weights: " +
         (f"max |delta logprob| {worst:.3g}, " if deltas else "") + what)
    return {"status": "fail" if problems else "pass", "detail": detail,
            "max_abs_logprob_delta": None if math.isnan(worst) else worst,
            "max_greedy_gap": None if math.isnan(gap) else gap, "tolerance": lp_tol, "served_dtype": dtype,
            "prompts": len(answers), "generated_tokens": positions, "prompt_logprobs": prompt_positions,
            "logprobs": bool(deltas)}


def _post_json(url: str, body: dict) -> tuple[int, dict | str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            text = exc.read(4096).decode("utf-8", errors="replace")
        except OSError:
            text = ""
        return exc.code, text

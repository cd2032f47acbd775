"""Scenario `serve`: an OpenAI-compatible inference server measured under load (docs/scenarios/serve.md).

The sweep opens the server once (a running one by URL, or one tpubench starts, waits for and
always stops: serving/server.py); each point is one load level (a concurrency or a request rate)
with its request lengths: prompts of exact token lengths made with the server's tokenizer, sent by
the streaming client (serving/load.py), and the metrics and validity of serving/metrics.py. Per
request rows are kept in the result (`requests`; `tpubench.load_requests` reads them).

Every point measures a cold server: its prompts are seeded from the point's key and the request's
index (no two points or requests share a prompt, nor does a long prompt begin with a short one),
and the engine's prefix cache is reset before it where the engine offers a way (recorded as
`environment.prefix_cache_reset`: True, False with why, None where the stack has no reset).
The server's chips are what it runs on (`environment.chips_source` says how they were read).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import tempfile
from pathlib import Path

import numpy as np

from tpubench.records.result import RunResult, now_iso
from tpubench.spec.point import RunPoint

# A point that sends for a duration gets distinct prompts for the requests it is expected to send
# (the client cycles through them past that, and such repeats are counted and warned about): its
# rate x duration, or for a closed loop this many requests per second per slot, plus a margin;
# at least DURATION_PROMPTS, at most MAX_DURATION_PROMPT_TOKENS prompt tokens in all.
DURATION_PROMPTS = 256
DURATION_REQUESTS_PER_SLOT_S = 4.0
DURATION_MARGIN = 1.25
MAX_DURATION_PROMPT_TOKENS = 8_000_000    # about 50 MB of prompt text
LOG_TAIL_CHARS = 2000


class ServeRun:

    def check(self, ctx, points):
        return {}, {}   # what a server can hold is the server's business; it answers per request

    @contextlib.contextmanager
    def open(self, ctx, points):
        from tpubench.serving.server import open_server

        first = points[0]
        server_spec = _resolved(first.params["server"], first.params.get("workload_dir") or ".")
        with tempfile.TemporaryDirectory(prefix="tpubench-serve-") as tmp, \
                open_server(server_spec, workload_model=_workload_model(first), workdir=Path(tmp),
                            on_phase=ctx.reporter.phase) as server:
            tokenizer = _tokenizer(server)

            def measure(point: RunPoint, base: dict) -> RunResult:
                return measure_serve_point(ctx, server, tokenizer, point, base)

            yield measure


def measure_serve_point(ctx, server, tokenizer, point: RunPoint, base: dict) -> RunResult:
    from tpubench.serving.client import Endpoint, RequestSpec, records_to_dicts
    from tpubench.serving.load import draw_lengths, run_load
    from tpubench.serving.metrics import failure_summary, outcome_metrics, request_warnings, validity_reasons

    p = point.params
    load = p["load"]
    n = p["num_requests"] or prompts_for_duration(load, p["duration_s"])
    warm_n = p["warmup_requests"]
    lengths = draw_lengths(p["input_lengths"], p["output_lengths"], n + warm_n, seed=p["seed"],
                           base_dir=p.get("workload_dir") or None)
    if not p["num_requests"]:
        lengths = _within_token_budget(lengths, warm_n)
    ctx.reporter.phase("prompts", 0, 1)
    # Seeded from the point and the request, not only the scenario's seed: two load points (or
    # two lengths) never send the same prompt, nor one that begins with another's, so no point is
    # served from the prefix cache a previous one filled.
    point_key = point.key()
    specs = [RequestSpec(_prompt(tokenizer, i_len, prompt_seed(point_key, k)), i_len, o_len)
             for k, (i_len, o_len) in enumerate(lengths)]
    ctx.reporter.phase("resetting the prefix cache", 0, 1)
    cache_reset, cache_note = server.reset_prefix_cache()
    # Exact output lengths where the server takes the fields for it (ignore_eos); per request the
    # ask is max_tokens, so min_tokens is left out of the shared body.
    extra = {k: v for k, v in server.extra_body(1).items() if k != "min_tokens"} if p["exact_output"] else {}
    endpoint = Endpoint(url=server.base_url, model=server.model, api=p["endpoint"], extra_body=extra,
                        timeout_s=p["request_timeout_s"])
    ctx.reporter.phase("load", 0, 1)
    outcome = run_load(endpoint, specs[warm_n:], warmup_requests=warm_n, warmup_specs=specs[:warm_n] or None,
                       concurrency=load.get("concurrency"), request_rate=load.get("request_rate"),
                       burstiness=load.get("burstiness") or 1.0, max_concurrency=load.get("max_concurrency"),
                       num_requests=p["num_requests"], duration_s=p["duration_s"], seed=p["seed"])
    ctx.reporter.phase("load", 1, 1)
    if not server.alive():
        raise RuntimeError(f"the server died during the point; log tail: {_tail(server)}")
    ok = [r for r in outcome.records if r.ok]
    if not ok:
        raise RuntimeError(f"every request failed: {failure_summary(outcome.records)}")
    metrics = outcome_metrics(outcome, slo=p["slo"], seed=p["seed"])
    reasons = validity_reasons(metrics, outcome.records, exact_output=p["exact_output"],
                               **({"prompt_tolerance_rel": 0.1} if p["endpoint"] == "chat" else {}))
    warnings = request_warnings(outcome.records)   # redirected requests, by where they were served
    if tokenizer is None:
        warnings.append("no tokenizer for the served model: prompts are plain words, their token counts "
                        "come from the server's usage (give server.tokenizer for exact prompt lengths)")
    if p["exact_output"] and not extra:
        warnings.append(f"{server.name} takes no ignore_eos: outputs are as long as asked only if the model "
                        "does not stop early (checked per request against usage)")
    env = _environment(base["environment"], server, p["server"].get("hardware"), warnings)
    env.update(prefix_cache_reset=cache_reset, prefix_cache_reset_note=cache_note,
               prompts_distinct=len(specs) - warm_n, prompt_seed="point key + request index")
    if cache_reset is False:
        warnings.append(f"the server's prefix cache could not be reset before this point ({cache_note}); "
                        "its prompts are still distinct from every other point's")
    reused = sum(1 for r in outcome.records if r.index >= len(specs) - warm_n)
    if reused:
        warnings.append(f"{reused} of {len(outcome.records)} requests reused a prompt (a duration-bound point "
                        f"cycled through its {len(specs) - warm_n} prompts): the server may have answered them "
                        "from its prefix cache; give num_requests instead")
    samples = _samples(ok)
    return RunResult(**{**base, "environment": env}, finished_at=now_iso(),
                     timing={"window_s": outcome.window_s, "wall_s": outcome.wall_s,
                             "server_startup_s": server.startup_s or 0.0},
                     samples=samples, metrics=_finite(metrics),
                     validity={"valid": not reasons, "reasons": reasons}, warnings=warnings,
                     requests=records_to_dicts(outcome.records),
                     warmup_requests=records_to_dicts(outcome.warmup_records),
                     server_log_tail=_tail(server))


def _samples(ok) -> dict[str, list[float]]:
    """Per-request distributions (seconds), as generate results keep theirs."""
    return {
        "ttft_s": [r.ttft_s for r in ok if r.ttft_s is not None],
        "tpot_s": [r.tpot_s for r in ok if r.tpot_s is not None],
        "e2e_s": [r.e2e_s for r in ok if r.e2e_s is not None],
        "itl_s": [gap for r in ok for gap in r.itl_s],
        "queue_s": [r.queue_s for r in ok],
    }


def _environment(env: dict, server, hardware: dict | None, warnings: list[str]) -> dict:
    """What was measured: the stack, and the hardware it runs on, never tpubench's own device.
    Declared hardware wins; a server tpubench started is what its command, environment and CPU
    affinity say it holds on this host (serving/server_chips.py); a running server's is unknown
    unless declared. `chips_source` says which; unknown chips leave the point unpriced."""
    env = {**env, "server_name": server.name, "server_version": server.version, "server": server.describe()}
    if hardware:
        env.update(accelerator_name=hardware["accelerator"], chips=hardware["chips"],
                   instance=hardware.get("instance"), hardware_declared=True,
                   chips_source="server.hardware (declared in the workload)", server_device=None)
    elif server.started_by_tpubench and server.hardware is not None:
        found = server.hardware
        env.update(accelerator_name=found.accelerator_name, chips=found.chips, chips_source=found.source,
                   server_device=found.device, hardware_declared=False)
        warnings.extend(found.warnings)
        if found.chips is None:
            warnings.append(f"the server's chips are unknown, so the point is unpriced: {found.reason}")
    else:
        env.update(accelerator_name=None, chips=None, hardware_declared=False, chips_source=None,
                   server_device=None)
        warnings.append("the server's hardware is unknown: declare server.hardware (accelerator, chips) to price it")
    return env


def prompt_seed(point_key: str, index: int) -> int:
    """The seed of request `index`'s prompt at the point whose key (everything that defines it:
    load, lengths, endpoint, seed, ...) is `point_key`."""
    return int.from_bytes(hashlib.sha256(f"{point_key}:{index}".encode()).digest()[:8], "big")


def prompts_for_duration(load: dict, duration_s: float) -> int:
    """Distinct prompts for a point that sends for `duration_s`: the requests it can be expected to
    send (open loop: rate x duration; closed loop: slots x DURATION_REQUESTS_PER_SLOT_S x duration)
    with a margin, at least DURATION_PROMPTS."""
    rate = load.get("request_rate")
    if rate and math.isfinite(rate):
        expected = rate * duration_s
    else:
        slots = load.get("concurrency") or load.get("max_concurrency") or 1
        expected = slots * DURATION_REQUESTS_PER_SLOT_S * duration_s
    return max(DURATION_PROMPTS, math.ceil(expected * DURATION_MARGIN))


def _within_token_budget(lengths: list, keep: int) -> list:
    """The first lengths whose prompts total at most MAX_DURATION_PROMPT_TOKENS (at least `keep`
    + DURATION_PROMPTS of them): a long duration must not make gigabytes of prompt text."""
    total = 0
    for i, (i_len, _) in enumerate(lengths):
        total += i_len
        if total > MAX_DURATION_PROMPT_TOKENS and i >= keep + DURATION_PROMPTS:
            return list(lengths[:i])
    return list(lengths)


def _finite(metrics: dict) -> dict:
    """Strict JSON has no inf: an infinite offered rate (rate inf) is kept as None."""
    return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in metrics.items()}


def _tail(server) -> str:
    try:
        return server.log_tail(LOG_TAIL_CHARS)
    except Exception:  # a log that cannot be read must not hide the measurement
        return ""


def _prompt(tokenizer, length: int, seed: int) -> str:
    if tokenizer is not None:
        from tpubench.serving.demo_model import prompt_of_length

        return prompt_of_length(tokenizer, length, seed)
    words = np.random.default_rng(seed).integers(0, len(_WORDS), size=length)
    return " ".join(_WORDS[i] for i in words)


_WORDS = ("time year people way day man thing woman life child world school state family student group "
          "country problem hand part place case week company system program question work government "
          "number night point home water room mother area money story fact month lot right study book "
          "eye job word business issue side kind head house service friend father power hour game line").split()


def _tokenizer(server):
    """The tokenizer of the served model, when it can be had without the network failing the run."""
    if not server.tokenizer:
        return None
    from tpubench.serving.demo_model import load_tokenizer

    try:
        return load_tokenizer(server.tokenizer)
    except Exception:  # noqa: BLE001 - no tokenizer only costs exact prompt lengths (warned per result)
        return None


def _workload_model(point: RunPoint) -> dict | None:
    if point.family is None:
        return None
    return {"family": point.family, "dtype": point.dtype, "config": point.model_config, "weights": point.weights,
            "hub_id": point.hub_id, "seed": point.measurement.get("seed", 0)}


def _resolved(server: dict, workload_dir: str) -> dict:
    """A local model path in launch.model is relative to the workload file."""
    launch = server.get("launch")
    if launch and launch.get("model") not in (None, "build"):
        candidate = Path(workload_dir) / launch["model"]
        if not Path(launch["model"]).is_absolute() and candidate.exists():
            server = {**server, "launch": {**launch, "model": str(candidate)}}
    return server

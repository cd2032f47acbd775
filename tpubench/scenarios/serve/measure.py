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

from tpubench.measure.energy import energy_metrics
from tpubench.records.result import RunResult, now_iso
from tpubench.scenarios.serve.capacity import ServeSteering
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.precision import kv_cache_quantization, precision_of

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

    def steering(self, points):
        """Capacity searches and the stop at over-saturation follow what points measure (capacity.py)."""
        return ServeSteering(points)

    @contextlib.contextmanager
    def open(self, ctx, points):
        from tpubench.serving.engine_metrics import PointScrape
        from tpubench.serving.server import open_server

        first = points[0]
        server_spec = _resolved(first.params["server"], first.params.get("workload_dir") or ".")
        with tempfile.TemporaryDirectory(prefix="tpubench-serve-") as tmp, \
                open_server(server_spec, workload_model=_workload_model(first), workdir=Path(tmp),
                            on_phase=ctx.reporter.phase) as server:
            tokenizer = _tokenizer(server)
            model_check = check_model(ctx, server, first)

            def measure(point: RunPoint, base: dict) -> RunResult:
                # The engine's own counters before and after the point, its gauges sampled during it.
                with PointScrape(server.base_url) as engine:
                    result = measure_serve_point(ctx, server, tokenizer, point, base,
                                                 on_window_start=engine.window_starts)
                return with_engine_figures(result, engine, model_check)

            yield measure


def measure_serve_point(ctx, server, tokenizer, point: RunPoint, base: dict, on_window_start=None) -> RunResult:
    from tpubench.serving.client import Endpoint, records_to_dicts
    from tpubench.serving.metrics import failure_summary, outcome_metrics, request_warnings, validity_reasons
    from tpubench.serving.saturation import window_figures

    p = point.params
    # A trace replay without either sends the whole trace (its own count, streamed).
    n = p["num_requests"] or (prompts_for_duration(p["load"], p["duration_s"]) if p["duration_s"] else 0)
    warm_n = p["warmup_requests"]
    ctx.reporter.phase("prompts", 0, 1)
    plan, specs = _request_specs(p, point.key(), tokenizer, n, warm_n)
    ctx.reporter.phase("resetting the prefix cache", 0, 1)
    cache_reset, cache_note = server.reset_prefix_cache()
    # Exact output lengths where the server takes the fields for it (ignore_eos); per request the
    # ask is max_tokens, so min_tokens is left out of the shared body.
    extra = {k: v for k, v in server.extra_body(1).items() if k != "min_tokens"} if p["exact_output"] else {}
    endpoint = Endpoint(url=server.base_url, model=server.model, api=p["endpoint"], extra_body=extra,
                        timeout_s=p["request_timeout_s"])
    ctx.reporter.phase("load", 0, 1)
    meter = ctx.energy.meter() if ctx.energy is not None else None   # a server launched on this host
    with meter.sampling() if meter is not None else contextlib.nullcontext():
        outcome = _send_load(endpoint, p, plan, specs, warm_n, on_window_start)
    ctx.reporter.phase("load", 1, 1)
    energy = _window_energy(meter, outcome)
    if not server.alive():
        raise RuntimeError(f"the server died during the point; log tail: {_tail(server)}")
    ok = [r for r in outcome.records if r.ok]
    if not ok:
        raise RuntimeError(f"every request failed: {failure_summary(outcome.records)}")
    metrics = outcome_metrics(outcome, slo=p["slo"], seed=p["seed"])
    steady, sat = window_figures(outcome)   # the steady-state window and the over-saturation test
    metrics.update(steady)
    metrics.update(sat.metrics())
    reasons = validity_reasons(metrics, outcome.records, exact_output=p["exact_output"],
                               **({"prompt_tolerance_rel": 0.1} if p["endpoint"] == "chat" else {}))
    warnings = request_warnings(outcome.records)   # redirected requests, by where they were served
    if sat.over_saturated:
        warnings.append(f"over-saturated: {sat.reason}; the figures depend on how long the point ran")
    if tokenizer is None:
        warnings.append("no tokenizer for the served model: prompts are plain words, their token counts "
                        "come from the server's usage (give server.tokenizer for exact prompt lengths)")
    if p["exact_output"] and not extra:
        warnings.append(f"{server.name} takes no ignore_eos: outputs are as long as asked only if the model "
                        "does not stop early (checked per request against usage)")
    env = _environment(base["environment"], server, p["server"].get("hardware"), warnings)
    _note_prompts(env, warnings, plan, specs, warm_n, outcome, cache_reset, cache_note)
    samples = _samples(ok)
    if energy is not None:
        # Every token the window's requests carried, the prompts and the answers (generate's rule).
        metrics.update(energy_metrics(energy, sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in ok)))
    # A cache dtype tpubench told the server (model.quantization: kv_fp8) is recorded as generate's is.
    precision = precision_of(point.dtype, point.quantization).as_dict() if point.quantization != "none" else {}
    return RunResult(**{**base, "environment": env}, finished_at=now_iso(), precision=precision,
                     timing={"window_s": outcome.window_s, "wall_s": outcome.wall_s,
                             "server_startup_s": server.startup_s or 0.0},
                     samples=samples, metrics=_finite(metrics),
                     validity={"valid": not reasons, "reasons": reasons}, warnings=warnings,
                     requests=records_to_dicts(outcome.records),
                     warmup_requests=records_to_dicts(outcome.warmup_records),
                     server_log_tail=_tail(server), saturation=sat.to_dict(),
                     energy=energy.as_dict() if energy is not None else {})


def _request_specs(p: dict, point_key: str, tokenizer, n: int, warm_n: int) -> tuple:
    """(the point's traffic plan, None for plain lengths; the warm-up then timed requests of plain
    lengths, None for a traffic plan). Prompts are seeded from the point and the request, not only
    the scenario's seed: two load points (or two lengths) never send the same prompt, nor one that
    begins with another's, so no point is served from the prefix cache a previous one filled."""
    from tpubench.serving.client import RequestSpec
    from tpubench.serving.load import draw_lengths

    plan = _traffic_plan(p, point_key, tokenizer, n) if p.get("traffic") else None
    if plan is not None:
        return plan, None
    lengths = draw_lengths(p["input_lengths"], p["output_lengths"], n + warm_n, seed=p["seed"],
                           base_dir=p.get("workload_dir") or None)
    if not p["num_requests"]:
        lengths = _within_token_budget(lengths, warm_n)
    specs = [RequestSpec(_prompt(tokenizer, i_len, prompt_seed(point_key, k)), i_len, o_len)
             for k, (i_len, o_len) in enumerate(lengths)]
    return None, specs


def _send_load(endpoint, p: dict, plan, specs, warm_n: int, on_window_start):
    """The point's requests sent to the endpoint at its load (serving.load.run_load): the warm-up,
    then the timed ones, of plain lengths or of its traffic plan."""
    from tpubench.serving.load import run_load

    load = p["load"]
    shape = dict(concurrency=load.get("concurrency"), request_rate=load.get("request_rate"),
                 burstiness=load.get("burstiness") or 1.0, max_concurrency=load.get("max_concurrency"))
    if plan is None:
        return run_load(endpoint, specs[warm_n:], warmup_requests=warm_n, warmup_specs=specs[:warm_n] or None,
                        **shape, num_requests=p["num_requests"], duration_s=p["duration_s"], seed=p["seed"],
                        on_window_start=on_window_start)
    outcome = run_load(endpoint, plan.specs or [], warmup_requests=warm_n, warmup_specs=plan.warmup or None,
                       **shape, num_requests=None if plan.sessions is not None else p["num_requests"],
                       duration_s=p["duration_s"], seed=p["seed"],
                       timed=plan.timed() if plan.timed is not None else None,
                       time_scale=load.get("time_scale", 1.0), sessions=plan.sessions,
                       on_window_start=on_window_start)
    _server_counted_prompts(outcome.records)
    return outcome


def _note_prompts(env: dict, warnings: list[str], plan, specs, warm_n: int, outcome, cache_reset,
                  cache_note) -> None:
    """How the point's prompts were made and kept distinct, into its environment, and warnings where
    the server may have answered some from its prefix cache."""
    env.update(prefix_cache_reset=cache_reset, prefix_cache_reset_note=cache_note)
    if plan is None:
        env.update(prompts_distinct=len(specs) - warm_n, prompt_seed="point key + request index")
    else:
        env.update(prompt_seed="point key", traffic={"label": plan.label, **plan.summary,
                                                     "prompt_lengths_exact": plan.exact_prompt_lengths})
    if cache_reset is False:
        warnings.append(f"the server's prefix cache could not be reset before this point ({cache_note}); "
                        "its prompts are still distinct from every other point's")
    # A dataset repeats its rows by design, and a replay or sessions make each request as they send
    # it; plain lengths and shared prefixes make a list up front, which a duration-bound point may outrun.
    if plan is None:
        distinct = len(specs) - warm_n
    else:
        distinct = len(plan.specs) if plan.specs is not None and plan.summary.get("mode") == "shared_prefix" else None
    reused = sum(1 for r in outcome.records if r.index >= distinct) if distinct is not None else 0
    if reused:
        warnings.append(f"{reused} of {len(outcome.records)} requests reused a prompt (a duration-bound point "
                        f"cycled through its {distinct} prompts): the server may have answered them "
                        "from its prefix cache; give num_requests instead")


def _window_energy(meter, outcome):
    """The energy of the serve window, first send to last reply (LoadOutcome.window_s), from
    readings taken over the whole load; None without a meter. Record times count from the
    client's perf_counter origin, the meter's clock."""
    if meter is None:
        return None
    sent = [r.sent_s for r in outcome.records if math.isfinite(r.sent_s)]
    ends = [r.end_s for r in outcome.records if math.isfinite(r.end_s)]
    if not sent or not ends:
        return None
    origin = outcome.origin_perf_counter_s
    return meter.measure(origin + min(sent), origin + max(ends))


def _traffic_plan(p: dict, point_key: str, tokenizer, n: int):
    """The point's requests from its `traffic` section (serving/traffic/), seeded from its key."""
    from tpubench.serving.traffic.plan import plan_traffic

    out = p.get("output_lengths")
    return plan_traffic(p["traffic"], vocab=_vocabulary(tokenizer), seed=prompt_seed(point_key, "traffic"),
                        num_requests=p["num_requests"], concurrency=p["load"].get("concurrency"),
                        warmup=p["warmup_requests"], base_dir=p.get("workload_dir") or None,
                        output_length=out if isinstance(out, int) else None, chat=p["endpoint"] == "chat",
                        default_requests=n)


def _vocabulary(tokenizer):
    """Words that are one token each of the served model's tokenizer (exact lengths), else plain words."""
    from tpubench.serving.traffic.common import Vocabulary

    if tokenizer is None:
        return Vocabulary.plain()
    from tpubench.serving.demo_model import word_pool

    pool = word_pool(tokenizer)
    if not pool:
        return Vocabulary.plain()
    return Vocabulary(tuple(pool), special_tokens=len(tokenizer("")["input_ids"]), exact=True)


def _server_counted_prompts(records) -> None:
    """A request whose prompt length was not known when it was made (a user's text, a chat history:
    prompt_len 0) is checked against nothing: the server's count is its length."""
    for r in records:
        if r.prompt_len == 0 and r.prompt_tokens is not None:
            r.prompt_len = r.prompt_tokens


def with_engine_figures(result: RunResult, engine, model_check: dict | None) -> RunResult:
    """The point's result with what the engine reported (`engine_metrics`, `engine_*` metrics and
    the cached share of its input, engine_cache_metrics) and the served-model check: a mismatch
    makes the point invalid, a skipped check is a warning."""
    from tpubench.serving.client import RequestRecord

    record, warnings = engine.result()
    ok = [RequestRecord.from_dict(r) for r in getattr(result, "requests", None) or [] if r.get("ok")]
    metrics = {**result.metrics, **engine_cache_metrics(record, ok)}
    validity = result.validity.model_copy(deep=True)
    warnings = [*result.warnings, *warnings]
    if model_check and model_check.get("status") == "fail":
        validity.valid = False
        validity.reasons.append(model_check["detail"])
    elif model_check and model_check.get("status") == "skipped":
        warnings.append(f"served-model check skipped: {model_check['detail']}")
    return result.model_copy(update={"metrics": metrics, "validity": validity, "warnings": warnings,
                                     "engine_metrics": record, "served_model_check": model_check})


def engine_cache_metrics(engine_record: dict, ok) -> dict:
    """The engine's figures of the point (serving/engine_metrics.py) as `engine_*` metrics, and the
    share of input tokens served from the prefix cache, `cached_input_share`: from the replies'
    usage (prompt_tokens_details.cached_tokens, exact per request) where every ok request has it,
    else the engine's prefix-cache hits / queries over the point (its warm-up included), else None.
    `cached_input_share_from_usage` is 1 or 0 accordingly (None without a share)."""
    figures = engine_record.get("figures") or {}
    out = {f"engine_{k}": v for k, v in figures.items()}
    counted = [r for r in ok if r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(r.prompt_tokens for r in counted)
    if ok and len(counted) == len(ok) and prompt:
        cached = sum(r.cached_tokens for r in counted)
        out.update(cached_prompt_tokens=cached, cached_input_share=cached / prompt, cached_input_share_from_usage=1)
    elif figures.get("prefix_cache_hit_rate") is not None:
        out.update(cached_prompt_tokens=None, cached_input_share=figures["prefix_cache_hit_rate"],
                   cached_input_share_from_usage=0)
    else:
        out.update(cached_prompt_tokens=None, cached_input_share=None, cached_input_share_from_usage=None)
    return out


def check_model(ctx, server, point: RunPoint) -> dict | None:
    """The served-model check (serving/served_model_check.py), once per server, shown on every
    point: None when the workload turns it off; "skipped" with why when tpubench has no weights."""
    if not point.params["server"].get("check_model", True):
        return None
    if not server.weights_path:
        return {"status": "skipped", "detail": "tpubench has no copy of the served weights (a server at a URL or "
                                               "a Hub id), so it cannot compare the server with transformers"}
    from tpubench.measure.numerics import tolerance
    from tpubench.serving.served_model_check import check_served_model, served_dtype

    ctx.reporter.phase("checking the served model", 0, 1)
    dtype = point.dtype if point.dtype not in (None, "server") else "float32"
    served = served_dtype(server.command, server.name, dtype)
    kv = kv_cache_quantization(point.quantization)
    if kv:   # a cache told to hold fp8 is not float32 arithmetic: the half-precision tolerance, said so
        served = f"{served} with an {kv} KV cache"
    try:
        result = check_served_model(server.base_url, server.model, server.weights_path,
                                    dtype=served, tolerance=tolerance)
    except Exception as exc:  # noqa: BLE001 - a reference that cannot load is a skipped check, not a lost run
        first = (str(exc).strip().splitlines() or [""])[0]
        result = {"status": "skipped", "detail": f"the reference could not run ({type(exc).__name__}: {first})"}
    ctx.reporter.phase("checking the served model", 1, 1)
    return result


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

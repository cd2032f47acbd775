"""Serving metrics: pure functions over the RequestRecords of one measured window
(docs/definitions.md#serving). Seconds throughout; names carry units like the generate
scenario's (`ttft_p99_s`).

Per request (ok requests only, except queue time which every request has):
    TTFT  = first token-bearing chunk - send
    E2E   = last token-bearing chunk - send
    TPOT  = (E2E - TTFT) / (completion_tokens - 1)       completion_tokens from the server's usage;
                                                         undefined for fewer than 2 tokens (usage is
                                                         checked against the stream by the client: an
                                                         impossible count fails its request, so no
                                                         ok request has a negative count)
    ITL   = every gap between consecutive token-bearing chunks, pooled over requests (a chunk can
            hold several tokens, so ITL is per chunk and TPOT per token; `tokens_per_chunk_mean`
            says how far apart they are)
    queue = send - scheduled send (client lateness plus any wait for a max_concurrency slot)

Over the window W = last reply finished - first send (all measured requests, failed included),
with P = prompt tokens and C = completion tokens of the ok requests:
    requests_per_s       = ok requests / W
    input_tokens_per_s   = P / W,   output_tokens_per_s = C / W,   total_tokens_per_s = (P + C) / W
    goodput_requests_per_s = ok requests meeting every SLO given (ttft_s, tpot_s, e2e_s; a request
                           without a TPOT cannot miss the TPOT SLO) / W;  slo_attainment = those /
                           all requests
    interactivity_tokens_per_s = 1 / median TPOT  (tokens per second one user sees)
    failure_rate         = failed requests / all requests
    achieved_send_rate   = (n - 1) / (last send - first send); offered_request_rate is given
    mean_concurrency     = sum(reply finished - send) / W   (requests in flight, Little's law)

Cost basis (seconds of the whole server per token; the cost module multiplies by chips and the
price per chip-second):
    share_in             = sum(TTFT) / sum(E2E) over ok requests  (`prefill_time_share`)
    input_s_per_token    = W * share_in / P
    output_s_per_token   = W * (1 - share_in) / C
    blended_s_per_token  = W / (P + C)

Uncertainty: a seeded bootstrap over requests (n_boot resamples, default 1000). Each resample
draws the ok requests with replacement; every statistic of one resample comes from the same draw
(a pooled ITL resample takes all gaps of the drawn requests). Latencies get a 95% CI for the
mean (`ttft_ci95_low_s`, `ttft_ci95_high_s`) and for p99 (`ttft_p99_ci95_low_s`, ...). Rates
are conditioned on the measured mean concurrency L: a resample's rate is L * sum(x*) /
sum(occupancy*), where occupancy = reply finished - send, which on the full sample is exactly
sum(x) / W; its 2.5 and 97.5 percentiles give `output_tokens_per_s_ci95_low` / `_high`. The cost
basis takes its bounds from the same resamples (`input_s_per_token_ci95_low`, ...). Queue time
is resampled over all requests. The pooled ITL p99 costs O(gaps) per resample, so its resamples
are capped to keep the work near 5e7 (at least 200).

Steady-state window (`steady_window`, `steady_metrics`; docs/definitions.md#steady-state): from
when the requests in flight first reach the load's level (a closed loop's concurrency; otherwise
rate x mean occupancy, Little's law) to when the count first (closed loop) or last (any other
load) falls below it, dips under STEADY_GRACE_S ignored; its own throughput and TTFT/TPOT
percentiles (`steady_*`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from tpubench.serving.client import RequestRecord

PERCENTILES = (50, 90, 95, 99)
_ITL_WORK = 5e7

NAN = math.nan


def _records(records: Iterable[Any]) -> list[RequestRecord]:
    return [r if isinstance(r, RequestRecord) else RequestRecord.from_dict(r) for r in records]


def _slo(slo: Any) -> dict[str, float]:
    if slo is None:
        return {}
    get = slo.get if isinstance(slo, Mapping) else (lambda k: getattr(slo, k, None))
    out = {k: get(k) for k in ("ttft_s", "tpot_s", "e2e_s")}
    if isinstance(slo, Mapping):
        unknown = set(slo) - set(out)
        if unknown:
            raise ValueError(f"unknown SLO keys {sorted(unknown)}: use ttft_s, tpot_s, e2e_s")
    return {k: float(v) for k, v in out.items() if v is not None}


def meets_slo(record: RequestRecord, slo: Any) -> bool:
    """An ok request meeting every SLO given (a missing TPOT cannot miss the TPOT SLO)."""
    s = _slo(slo)
    if not record.ok:
        return False
    if "ttft_s" in s and (record.ttft_s is None or record.ttft_s > s["ttft_s"]):
        return False
    if "e2e_s" in s and (record.e2e_s is None or record.e2e_s > s["e2e_s"]):
        return False
    tpot = record.tpot_s
    if "tpot_s" in s and tpot is not None and tpot > s["tpot_s"]:
        return False
    return True


def _weighted_quantile(sorted_v: np.ndarray, w: np.ndarray, q: float) -> float:
    """np.percentile (linear) of the array holding sorted_v[i] w[i] times."""
    cw = np.cumsum(w)
    n = cw[-1] if cw.size else 0
    if n <= 0:
        return NAN
    h = (n - 1) * q
    lo = math.floor(h)
    i_lo = int(np.searchsorted(cw, lo, side="right"))
    i_hi = int(np.searchsorted(cw, min(lo + 1, n - 1), side="right"))
    return float(sorted_v[i_lo] + (h - lo) * (sorted_v[i_hi] - sorted_v[i_lo]))


def _describe(name: str, v: np.ndarray) -> dict[str, float]:
    keys = ["mean", "stdev", "min", "max", *(f"p{p}" for p in PERCENTILES)]
    if v.size == 0:
        out = {f"{name}_{k}_s": NAN for k in keys}
        out[f"{name}_cv"] = NAN
        return out
    m = float(v.mean())
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    out = {f"{name}_mean_s": m, f"{name}_stdev_s": sd, f"{name}_cv": sd / m if m else NAN,
           f"{name}_min_s": float(v.min()), f"{name}_max_s": float(v.max())}
    for p, x in zip(PERCENTILES, np.percentile(v, PERCENTILES)):
        out[f"{name}_p{p}_s"] = float(x)
    return out


class _Owned:
    """Values owned by requests (one each, or several for ITL), sorted once for weighted
    quantiles: a resample is a count per request."""

    def __init__(self, values: np.ndarray, owners: np.ndarray):
        order = np.argsort(values, kind="stable")
        self.values = values[order]
        self.owners = owners[order]

    def stats(self, counts: np.ndarray, p99: bool = True, median: bool = False) -> tuple[float, float, float]:
        if self.values.size == 0:
            return NAN, NAN, NAN
        w = counts[self.owners]
        total = w.sum()
        if total == 0:
            return NAN, NAN, NAN
        mean = float(w @ self.values) / total
        q99 = _weighted_quantile(self.values, w, 0.99) if p99 else NAN
        q50 = _weighted_quantile(self.values, w, 0.50) if median else NAN
        return mean, q99, q50


def _ci(samples: list[float]) -> tuple[float, float]:
    a = np.asarray(samples, dtype=float)
    a = a[np.isfinite(a)]
    if a.size < 2:
        return NAN, NAN
    lo, hi = np.percentile(a, [2.5, 97.5])
    return float(lo), float(hi)


def send_rate(sent_s: Sequence[float]) -> float:
    s = [t for t in sent_s if t is not None and math.isfinite(t)]
    if len(s) < 2:
        return NAN
    span = max(s) - min(s)
    return (len(s) - 1) / span if span > 0 else math.inf


def cost_basis(window_s: float, ttft_sum_s: float, e2e_sum_s: float, prompt_tokens: float,
               completion_tokens: float) -> dict[str, float]:
    """Seconds of the whole server per input, output and any token (formulas in the module doc)."""
    share = ttft_sum_s / e2e_sum_s if e2e_sum_s > 0 else NAN
    tokens = prompt_tokens + completion_tokens
    return {
        "prefill_time_share": share,
        "input_s_per_token": window_s * share / prompt_tokens if prompt_tokens > 0 else NAN,
        "output_s_per_token": window_s * (1 - share) / completion_tokens if completion_tokens > 0 else NAN,
        "blended_s_per_token": window_s / tokens if tokens > 0 else NAN,
    }


def serving_metrics(records: Iterable[Any], *, slo: Any = None, offered_request_rate: float | None = None,
                    client: Mapping[str, float] | None = None, n_boot: int = 1000,
                    seed: int = 0) -> dict[str, float]:
    """Flat metrics of one measured window (see the module doc for every definition). `client`
    (LoadOutcome.client_figures()) is copied in for validity."""
    recs = _records(records)
    ok = [r for r in recs if r.ok]
    n_all, n_ok = len(recs), len(ok)
    sent = [r.sent_s for r in recs if math.isfinite(r.sent_s)]
    ends = [r.end_s for r in recs if math.isfinite(r.end_s)]
    window = (max(ends) - min(sent)) if sent and ends else NAN
    out: dict[str, float] = {}

    def arr(xs) -> np.ndarray:
        return np.asarray(list(xs), dtype=float)

    ttft = arr(NAN if r.ttft_s is None else r.ttft_s for r in ok)
    e2e = arr(NAN if r.e2e_s is None else r.e2e_s for r in ok)
    tpot = arr(NAN if r.tpot_s is None else r.tpot_s for r in ok)
    # Without usage the asked prompt length stands in (counted in usage_missing, flagged by validity).
    prompt = arr(r.prompt_tokens if r.prompt_tokens is not None else r.prompt_len for r in ok)
    completion = arr(r.completion_tokens or 0 for r in ok)
    occupancy = arr(r.end_s - r.sent_s for r in ok)
    itl_values, itl_owners = [], []
    for i, r in enumerate(ok):
        g = r.itl_s
        itl_values.extend(g)
        itl_owners.extend([i] * len(g))
    itl = arr(itl_values)
    queue = arr(r.queue_s for r in recs if math.isfinite(r.sent_s))

    owned = {}
    for name, v in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        keep = np.isfinite(v)
        owned[name] = _Owned(v[keep], np.flatnonzero(keep))
        out.update(_describe(name, v[keep]))
    owned["itl"] = _Owned(itl, np.asarray(itl_owners, dtype=int))
    out.update(_describe("itl", itl))
    out.update(_describe("queue", queue))

    P, C = float(prompt.sum()), float(completion.sum())
    rate = (lambda x: x / window) if window and window > 0 else (lambda x: NAN)
    out.update({
        "requests_ok": n_ok, "requests_failed": n_all - n_ok, "requests_total": n_all,
        "failure_rate": (n_all - n_ok) / n_all if n_all else NAN,
        "window_s": window,
        "prompt_tokens_total": int(P), "completion_tokens_total": int(C),
        "requests_per_s": rate(n_ok), "input_tokens_per_s": rate(P), "output_tokens_per_s": rate(C),
        "total_tokens_per_s": rate(P + C),
        "offered_request_rate": NAN if offered_request_rate is None else float(offered_request_rate),
        "achieved_send_rate": send_rate(sent),
        "mean_concurrency": rate(float(sum(r.end_s - r.sent_s for r in recs
                                           if math.isfinite(r.end_s) and math.isfinite(r.sent_s)))),
        "usage_missing": sum(1 for r in ok if not r.usage_reported),
    })
    chunks = sum(r.token_chunks for r in ok)
    out["tokens_per_chunk_mean"] = C / chunks if chunks else NAN
    tpot_p50 = out["tpot_p50_s"]
    out["interactivity_tokens_per_s"] = 1.0 / tpot_p50 if tpot_p50 and tpot_p50 > 0 else NAN
    goals = _slo(slo)
    if goals:
        good = sum(1 for r in ok if meets_slo(r, goals))
        out["goodput_requests_per_s"] = rate(good)
        out["slo_attainment"] = good / n_all if n_all else NAN
    else:
        out["goodput_requests_per_s"] = NAN
        out["slo_attainment"] = NAN
    both = np.isfinite(ttft) & np.isfinite(e2e)
    out.update(cost_basis(window, float(ttft[both].sum()), float(e2e[both].sum()), P, C))

    out.update(_bootstrap(owned, queue, both, ttft, e2e, prompt, completion, occupancy, window, out,
                          n_boot, seed))
    if client:
        out.update({k: v for k, v in client.items()})
    return out


def _bootstrap(owned, queue, both, ttft, e2e, prompt, completion, occupancy, window, point, n_boot, seed):
    names_rate = ("requests_per_s", "input_tokens_per_s", "output_tokens_per_s", "total_tokens_per_s")
    names_cost = ("input_s_per_token", "output_s_per_token", "blended_s_per_token")
    out: dict[str, float] = {}
    n = ttft.size
    boots: dict[str, list[float]] = {k: [] for k in (*names_rate, *names_cost, "interactivity_tokens_per_s")}
    for d in ("ttft", "tpot", "e2e", "itl"):
        boots[f"{d}_mean"], boots[f"{d}_p99"] = [], []
    if n and n_boot > 0 and window and window > 0:
        rng = np.random.default_rng([seed, 0])
        itl_boots = n_boot if owned["itl"].values.size == 0 else max(
            200, min(n_boot, int(_ITL_WORK // owned["itl"].values.size)))
        L = occupancy.sum() / window
        ttft0, e2e0 = np.where(both, ttft, 0.0), np.where(both, e2e, 0.0)
        ones = np.ones(n)
        for b in range(n_boot):
            c = np.bincount(rng.integers(0, n, n), minlength=n).astype(float)
            for d in ("ttft", "e2e", "tpot"):
                m, q99, q50 = owned[d].stats(c, median=(d == "tpot"))
                boots[f"{d}_mean"].append(m)
                boots[f"{d}_p99"].append(q99)
                if d == "tpot":
                    boots["interactivity_tokens_per_s"].append(1.0 / q50 if q50 and q50 > 0 else NAN)
            if b < itl_boots:
                m, q99, _ = owned["itl"].stats(c)
                boots["itl_mean"].append(m)
                boots["itl_p99"].append(q99)
            occ = c @ occupancy
            if occ <= 0:
                continue
            p, o = c @ prompt, c @ completion
            req = L * (c @ ones) / occ
            r_in, r_out = L * p / occ, L * o / occ
            boots["requests_per_s"].append(req)
            boots["input_tokens_per_s"].append(r_in)
            boots["output_tokens_per_s"].append(r_out)
            boots["total_tokens_per_s"].append(r_in + r_out)
            e = c @ e2e0
            share = (c @ ttft0) / e if e > 0 else NAN
            boots["input_s_per_token"].append(share / r_in if r_in > 0 else NAN)
            boots["output_s_per_token"].append((1 - share) / r_out if r_out > 0 else NAN)
            boots["blended_s_per_token"].append(1.0 / (r_in + r_out) if r_in + r_out > 0 else NAN)
    for d in ("ttft", "tpot", "e2e", "itl"):
        out[f"{d}_ci95_low_s"], out[f"{d}_ci95_high_s"] = _ci(boots[f"{d}_mean"])
        out[f"{d}_p99_ci95_low_s"], out[f"{d}_p99_ci95_high_s"] = _ci(boots[f"{d}_p99"])
    for k in (*names_rate, *names_cost, "interactivity_tokens_per_s"):
        out[f"{k}_ci95_low"], out[f"{k}_ci95_high"] = _ci(boots[k])
    # Queue time: its own resample over every request.
    qm, qp = [], []
    if queue.size and n_boot > 0:
        rng = np.random.default_rng([seed, 1])
        q = _Owned(queue, np.arange(queue.size))
        for _ in range(n_boot):
            c = np.bincount(rng.integers(0, queue.size, queue.size), minlength=queue.size).astype(float)
            m, q99, _ = q.stats(c)
            qm.append(m)
            qp.append(q99)
    out["queue_ci95_low_s"], out["queue_ci95_high_s"] = _ci(qm)
    out["queue_p99_ci95_low_s"], out["queue_p99_ci95_high_s"] = _ci(qp)
    return out


def outcome_metrics(outcome: Any, slo: Any = None, n_boot: int = 1000, seed: int = 0) -> dict[str, float]:
    """serving_metrics of a LoadOutcome's measured records, with its offered rate and client figures."""
    return serving_metrics(outcome.records, slo=slo, offered_request_rate=outcome.offered_request_rate,
                           client=outcome.client_figures(), n_boot=n_boot, seed=seed)


# ----------------------------------------------------------------------------- validity

MAX_LOOP_LAG_P99_S = 0.005
MIN_SEND_RATIO = 0.95
PROMPT_TOLERANCE_TOKENS = 4
PROMPT_TOLERANCE_REL = 0.02


def _error_kind(error: str) -> str:
    if error.startswith("HTTP "):
        return error.split(":", 1)[0]
    return error.split(" (", 1)[0].split(":", 1)[0]


def failure_summary(records: Iterable[Any]) -> str:
    """'HTTP 500 x3 (HTTP 500: {...}); timeout after 2 s x1' — kinds by count, one example each."""
    errs = [r.error for r in _records(records) if not r.ok and r.error]
    kinds = Counter(_error_kind(e) for e in errs)
    example = {}
    for e in errs:
        example.setdefault(_error_kind(e), e)
    return "; ".join(f"{k} x{c}" + (f" ({example[k]})" if example[k] != k else "")
                     for k, c in kinds.most_common())


def validity_reasons(metrics: Mapping[str, float], records: Iterable[Any] = (), *, exact_output: bool = False,
                     prompt_tolerance_tokens: int = PROMPT_TOLERANCE_TOKENS,
                     prompt_tolerance_rel: float = PROMPT_TOLERANCE_REL,
                     max_loop_lag_p99_s: float = MAX_LOOP_LAG_P99_S,
                     min_send_ratio: float = MIN_SEND_RATIO) -> list[str]:
    """Why a serving point is not a valid measurement (empty: valid).

    - the client's event-loop lag p99 above 5 ms (the client, not the server, set the timings);
    - open loop at a finite rate: the achieved send rate under 95% of the offered one;
    - any failed request (with the kinds of failure);
    - token counts unlike what was asked: a prompt counted by the server more than
      max(prompt_tolerance_tokens, prompt_tolerance_rel * asked) tokens away from the asked length
      (default max(4, 2%): a text prompt re-tokenised by the server may differ by a few tokens;
      a chat template adds its own, so chat callers widen it), and, with exact_output, completion
      tokens different from max_tokens;
    - a server that reported no usage (token counts are then client estimates).
    """
    recs = _records(records)
    reasons = []
    total = metrics.get("requests_total", len(recs))
    if not total:
        return ["no measured request"]
    lag = metrics.get("client_loop_lag_p99_s")
    if lag is not None and math.isfinite(lag) and lag > max_loop_lag_p99_s:
        reasons.append(f"client event-loop lag p99 {lag * 1e3:.1f} ms > {max_loop_lag_p99_s * 1e3:g} ms: "
                       "the client's timings are not trustworthy (too much load on one client process)")
    offered, achieved = metrics.get("offered_request_rate"), metrics.get("achieved_send_rate")
    if (offered is not None and achieved is not None and math.isfinite(offered) and offered > 0
            and not math.isnan(achieved) and achieved < min_send_ratio * offered):
        why = ""
        waits = [r.slot_wait_s for r in recs]
        if waits and max(waits) > 0:
            why = (f" (max_concurrency held requests back: mean slot wait "
                   f"{float(np.mean(waits)) * 1e3:.1f} ms)")
        reasons.append(f"achieved send rate {achieved:.3g} req/s < {min_send_ratio:.0%} of the offered "
                       f"{offered:.3g} req/s{why}")
    failed = metrics.get("requests_failed", sum(1 for r in recs if not r.ok))
    if failed:
        summary = failure_summary(recs)
        reasons.append(f"{failed} of {total} requests failed ({failed / total:.1%})" +
                       (f": {summary}" if summary else ""))
    ok = [r for r in recs if r.ok]
    with_usage = [r for r in ok if r.usage_reported]
    bad_prompt = [r for r in with_usage if r.prompt_tokens is not None and abs(r.prompt_tokens - r.prompt_len)
                  > max(prompt_tolerance_tokens, prompt_tolerance_rel * r.prompt_len)]
    if bad_prompt:
        r = bad_prompt[0]
        reasons.append(f"{len(bad_prompt)} of {len(with_usage)} requests had prompt_tokens more than "
                       f"max({prompt_tolerance_tokens}, {prompt_tolerance_rel:.0%}) away from the asked length "
                       f"(request {r.index}: asked {r.prompt_len}, server counted {r.prompt_tokens})")
    if exact_output:
        bad_out = [r for r in with_usage if r.completion_tokens != r.max_tokens]
        if bad_out:
            r = bad_out[0]
            reasons.append(f"{len(bad_out)} of {len(with_usage)} requests did not get exactly max_tokens "
                           f"completion tokens (request {r.index}: asked {r.max_tokens}, got "
                           f"{r.completion_tokens}); is ignore_eos/min_tokens accepted by the server?")
    missing = len(ok) - len(with_usage)
    if missing:
        reasons.append(f"{missing} of {len(ok)} ok requests came without usage: token counts are "
                       "client estimates (token-bearing chunks, asked prompt lengths are not checked)")
    return reasons


def request_warnings(records: Iterable[Any]) -> list[str]:
    """What a point's result should say about where its requests went: redirected requests, by
    the URL that served them (the result's environment names the URL given, which may be another
    host and other hardware)."""
    recs = _records(records)
    served = Counter(r.served_url for r in recs if r.served_url)
    if not served:
        return []
    where = ", ".join(f"{url} ({n})" for url, n in served.most_common(5))
    more = f" and {len(served) - 5} more URLs" if len(served) > 5 else ""
    return [f"{sum(served.values())} of {len(recs)} requests were redirected and served at {where}{more}, "
            "not at the URL given: the hardware declared for that URL may not be the one measured"]


# ----------------------------------------------------------------------------- tables


def records_frame(records: Iterable[Any], with_chunks: bool = False):
    """One row per request (pandas imported here, not at module import)."""
    import pandas as pd

    rows = []
    for r in _records(records):
        d = r.to_dict()
        chunks = d.pop("token_chunk_s")
        d["token_chunks"] = len(chunks)
        d["tpot_s"] = r.tpot_s
        if with_chunks:
            d["token_chunk_s"] = chunks
        rows.append(d)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- windows

# A dip of the in-flight count under the target shorter than this is not the end of the steady
# state: a closed-loop worker sends its next request only after its previous reply ended, so the
# count drops for the client's turnaround (microseconds, up to the loop lag a valid point allows).
STEADY_GRACE_S = 0.01


def in_flight_intervals(records: Iterable[Any], target: int, grace_s: float = STEADY_GRACE_S
                        ) -> list[tuple[float, float]]:
    """The intervals (start, end) during which at least `target` requests were in flight (sent,
    reply not finished), from the requests' sends and reply ends; intervals apart by at most
    `grace_s` are one. At equal times a send counts before an end (a back-to-back resend is no dip)."""
    if target < 1:
        raise ValueError(f"target must be >= 1 (got {target})")
    events = []
    for r in _records(records):
        if math.isfinite(r.sent_s) and math.isfinite(r.end_s):
            events.append((r.sent_s, 0, 1))
            events.append((r.end_s, 1, -1))
    events.sort()
    out: list[tuple[float, float]] = []
    count, opened = 0, None
    for t, _, step in events:
        count += step
        if opened is None and count >= target:
            opened = t
        elif opened is not None and count < target:
            if out and opened - out[-1][1] <= grace_s:
                opened = out.pop()[0]
            out.append((opened, t))
            opened = None
    return out


def steady_window(records: Iterable[Any], target: int, *, until: Literal["first_drop", "last_drop"] = "first_drop",
                  grace_s: float = STEADY_GRACE_S) -> tuple[float, float] | None:
    """The steady-state window (start, end): from when the in-flight count first reaches `target`
    to when it first falls below it (`first_drop`: a closed loop, whose count stays at its
    concurrency until the requests run out) or falls below it for the last time (`last_drop`: an
    open loop, whose count wanders about its expected level until arrivals stop). None when the
    count never reaches the target or the window has no length."""
    spans = in_flight_intervals(records, target, grace_s)
    if not spans:
        return None
    start, end = spans[0][0], (spans[0][1] if until == "first_drop" else spans[-1][1])
    return (start, end) if end > start else None


def steady_target(outcome_mode: str, *, concurrency: int | None = None, request_rate: float | None = None,
                  max_concurrency: int | None = None, records: Iterable[Any] = ()) -> int:
    """The in-flight count of the steady state: a closed loop's concurrency; any other load's
    (open loop, trace replay, sessions) expected in-flight count by Little's law, rate x mean
    occupancy (reply finished - send) of its requests, rounded, at least 1 and at most
    max_concurrency; the rate is the load's nominal one, else (replay, sessions) the achieved send
    rate. Rate inf: every request, or max_concurrency."""
    if outcome_mode == "closed":
        return int(concurrency)
    recs = [r for r in _records(records) if math.isfinite(r.sent_s) and math.isfinite(r.end_s)]
    cap = max_concurrency or max(len(recs), 1)
    if request_rate is None:
        request_rate = send_rate([r.sent_s for r in recs])
    if not recs or not request_rate > 0:
        return 1
    if math.isinf(request_rate):
        return min(len(recs), cap)
    occupancy = float(np.mean([r.end_s - r.sent_s for r in recs]))
    return int(min(cap, max(1, round(request_rate * occupancy))))


def steady_metrics(records: Iterable[Any], target: int, *, until: Literal["first_drop", "last_drop"] = "first_drop",
                   grace_s: float = STEADY_GRACE_S) -> dict[str, float]:
    """Metrics of the steady-state window (steady_window), NaN without one:
    steady_window_start_s / _end_s / steady_window_s (D), steady_target_concurrency;
    steady_requests: ok requests sent in the window (their TTFT and TPOT give steady_ttft_p50_s,
    _p99_s, steady_tpot_p50_s, _p99_s); steady_requests_per_s: ok replies finished in the window / D;
    steady_output_tokens_per_s: output tokens whose chunk arrived in the window / D (a request's
    usage count spread evenly over its token-bearing chunks)."""
    recs = _records(records)
    window = steady_window(recs, target, until=until, grace_s=grace_s)
    out = {"steady_target_concurrency": float(target)}
    names = ("steady_window_start_s", "steady_window_end_s", "steady_window_s", "steady_requests",
             "steady_requests_per_s", "steady_output_tokens_per_s", "steady_ttft_p50_s", "steady_ttft_p99_s",
             "steady_tpot_p50_s", "steady_tpot_p99_s")
    if window is None:
        return {**out, **{k: NAN for k in names}}
    a, b = window
    d = b - a
    ok = [r for r in recs if r.ok]
    inside = [r for r in ok if a <= r.sent_s <= b]
    finished = sum(1 for r in ok if a <= r.end_s <= b)
    tokens = 0.0
    for r in ok:
        chunks = r.token_chunk_s
        if chunks and r.completion_tokens:
            in_w = sum(1 for t in chunks if a <= t <= b)
            tokens += r.completion_tokens * in_w / len(chunks)
    out.update(steady_window_start_s=a, steady_window_end_s=b, steady_window_s=d, steady_requests=len(inside),
               steady_requests_per_s=finished / d, steady_output_tokens_per_s=tokens / d)
    for name, values in (("ttft", [r.ttft_s for r in inside if r.ttft_s is not None]),
                         ("tpot", [r.tpot_s for r in inside if r.tpot_s is not None])):
        p50, p99 = np.percentile(values, [50, 99]) if values else (NAN, NAN)
        out[f"steady_{name}_p50_s"], out[f"steady_{name}_p99_s"] = float(p50), float(p99)
    return out

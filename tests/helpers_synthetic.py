"""Synthetic tpubench results for tests and benchmarks (a plain module: import it, no fixtures).

`make_result(...)` builds a RunResult whose metrics are mutually consistent, derived from a few
knobs (batch, lengths, mean TTFT and E2E, a relative CI half-width), so a test can compute the
expected cost by hand:

    TPOT = (E2E - TTFT) / (O - 1)          output tokens/s = B * O / E2E
    every 95% CI = mean * (1 -/+ rel_half_width)

`write_results(dir, [dict(...), ...])` writes one file per spec and returns the paths.

`make_serve_result(...)` builds a result of scenario `serve` (a server under load) from its measured
window, chips and token counts, with the figures cost reads from a server (seconds of the whole
server per token), split between input and output by `share_in`:

    input_s_per_token   = window_s * share_in       / prompt_tokens
    output_s_per_token  = window_s * (1 - share_in) / completion_tokens
    blended_s_per_token = window_s / (prompt_tokens + completion_tokens)
    output tokens/s = completion_tokens / window_s      every 95% CI = value * (1 -/+ rel_half_width)

`write_serve_results(dir, [dict(...), ...])` writes them.

`make_train_result(...)` builds a result of scenario `train` (docs/scenarios/train.md) from its batch
B (sequences per data-parallel rank per micro-step), sequence length S, world size W (data-parallel
ranks; `chips` defaults to W), gradient accumulation G and the mean time of one optimizer step:

    training tokens per step = B * S * W * G
    train_tokens_per_s = tokens per step / step_s       train_tokens_per_s_per_chip = that / W
    train_s_per_token  = step_s / tokens per step       (seconds of the whole world per token)
    every 95% CI = value * (1 -/+ rel_half_width)

`write_train_results(dir, [dict(...), ...])` writes them.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any, Iterable

from tpubench.output.frames import flatten
from tpubench.records.result import RunResult, write_result

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


def latency_summary(mean: float, rel_half_width: float, p99: float | None = None) -> dict[str, float]:
    """mean, stdev, cv, min, max, p50..p99 and the 95% CI of one latency, all in seconds."""
    if not math.isfinite(mean):
        return {k: math.nan for k in ("mean", "stdev", "cv", "min", "max", "p50", "p90", "p95", "p99",
                                      "ci95_low", "ci95_high")}
    r = rel_half_width
    p99 = mean * (1 + 3 * r) if p99 is None else p99
    stdev = mean * r
    return {
        "mean": mean, "stdev": stdev, "cv": stdev / mean if mean else math.nan,
        "min": mean * (1 - 2 * r), "max": max(p99, mean) * 1.05,
        "p50": mean, "p90": mean * (1 + 1.5 * r), "p95": mean * (1 + 2 * r), "p99": p99,
        "ci95_low": mean * (1 - r), "ci95_high": mean * (1 + r),
    }


def synthetic_metrics(*, batch_size: int, input_length: int, output_length: int, ttft_s: float,
                      e2e_s: float, rel_half_width: float = 0.02, iterations: int = 10,
                      ttft_p99_s: float | None = None, tpot_p99_s: float | None = None,
                      peak_memory_bytes: int = 40 * 2**30) -> dict[str, float]:
    b, i, o = batch_size, input_length, output_length
    tpot = (e2e_s - ttft_s) / (o - 1) if o > 1 else math.nan
    metrics: dict[str, float] = {}
    p99s = {"ttft": ttft_p99_s, "tpot": tpot_p99_s, "itl": tpot_p99_s, "e2e": None}
    means = {"ttft": ttft_s, "tpot": tpot, "itl": tpot, "e2e": e2e_s}
    # Names as tpubench.scenarios.generate.measure.summarize_samples writes them: `<name>_<stat>_s` for
    # times, unitless `<name>_cv`, and the mean rate of a `_per_s` metric under its bare name.
    for name in LATENCY_METRICS:
        for stat, value in latency_summary(means[name], rel_half_width, p99s[name]).items():
            metrics[f"{name}_cv" if stat == "cv" else f"{name}_{stat}_s"] = value
    rates = {
        "output_tokens_per_s": b * o / e2e_s,
        "prefill_tokens_per_s": b * i / ttft_s,
        "decode_tokens_per_s": b * (o - 1) / (e2e_s - ttft_s) if o > 1 else math.nan,
    }
    r = rel_half_width
    for name, rate in rates.items():
        metrics.update({
            name: rate, f"{name}_stdev": rate * r, f"{name}_cv": r,
            f"{name}_min": rate * (1 - 3 * r), f"{name}_max": rate * (1 + 2 * r),
            f"{name}_p50": rate, f"{name}_p90": rate * (1 + r), f"{name}_p95": rate * (1 + 1.5 * r),
            f"{name}_p99": rate * (1 + 2 * r),
            f"{name}_ci95_low": rate * (1 - r), f"{name}_ci95_high": rate * (1 + r),
        })
    metrics.update({
        "output_tokens_per_s_ci95_rel": r,
        "peak_memory_bytes": peak_memory_bytes,
        "iterations": iterations,
        "generated_tokens": b * o,
    })
    return metrics


def synthetic_samples(metrics: dict[str, float], iterations: int, itl_count: int, seed: int) -> dict[str, list[float]]:
    """Raw per-iteration samples scattered around the means (only for realistic file sizes)."""
    rng = random.Random(seed)
    out = {}
    for name in ("ttft", "tpot", "e2e"):
        mean, sd = metrics[f"{name}_mean_s"], metrics[f"{name}_stdev_s"]
        out[f"{name}_s"] = [max(0.0, rng.gauss(mean, sd)) for _ in range(iterations)] if math.isfinite(mean) else []
    mean, sd = metrics["itl_mean_s"], metrics["itl_stdev_s"]
    out["itl_s"] = [max(0.0, rng.gauss(mean, sd)) for _ in range(itl_count)] if math.isfinite(mean) else []
    return out


def make_result(*, accelerator: str = "NVIDIA H100 80GB HBM3", device: str = "cuda", chips: int = 1,
                backend: str = "torch", workload: str = "synthetic", scale: str = "full",
                family: str = "qwen3_moe", dtype: str = "bfloat16", execution_mode: str = "eager",
                experts_implementation: str | None = None,
                batch_size: int = 8, input_length: int = 1024, output_length: int = 128,
                ttft_s: float = 0.2, e2e_s: float = 2.0, rel_half_width: float = 0.02,
                iterations: int = 10, ttft_p99_s: float | None = None, tpot_p99_s: float | None = None,
                valid: bool = True, invalid_reasons: Iterable[str] = (), status: str = "ok",
                error: str | None = None, samples: bool = False, itl_samples: int = 64, seed: int = 0,
                host: str = "synthetic-host", torch_version: str | None = "2.11.0",
                transformers_version: str | None = "5.0.0", jax_version: str | None = None,
                started_at: str = "2026-12-01T00:00:00+00:00", noisy_cv: float | None = None) -> RunResult:
    """A RunResult with consistent metrics; a failed one (status='failed') carries no metrics; with
    `noisy_cv`, marked noisy (records/usable.py) as a headline CV that high above max_cv=10% makes it."""
    point = {
        "workload": workload, "scale": scale, "family": family, "hub_id": None, "weights": "random",
        "trust_remote_code": False, "dtype": dtype, "experts_implementation": experts_implementation,
        "model_config": {}, "batch_size": batch_size, "input_length": input_length,
        "output_length": output_length, "execution_mode": execution_mode, "compile_options": {},
        "measurement": {},
    }
    environment = {
        "accelerator_name": accelerator, "chips": chips, "hostname": host, "torch": torch_version,
        "transformers": transformers_version, "jax": jax_version, "tpubench": "0.1.0",
        "git_revision": "synthetic",
    }
    metrics: dict[str, Any] = {}
    sample_lists: dict[str, list[float]] = {}
    if status == "ok":
        metrics = synthetic_metrics(batch_size=batch_size, input_length=input_length,
                                    output_length=output_length, ttft_s=ttft_s, e2e_s=e2e_s,
                                    rel_half_width=rel_half_width, iterations=iterations,
                                    ttft_p99_s=ttft_p99_s, tpot_p99_s=tpot_p99_s)
        if samples:
            sample_lists = synthetic_samples(metrics, iterations, itl_samples, seed)
    key = f"{workload}-{scale}-{accelerator}-{chips}-b{batch_size}-i{input_length}-o{output_length}-{seed}"
    result = _result(status, error, workload, point, key, backend, device, environment, started_at, metrics,
                     valid, invalid_reasons, samples=sample_lists)
    if noisy_cv is not None:
        result.validity.noise, result.validity.cv = [f"throughput CV {noisy_cv:.1%} above max_cv=10%"], noisy_cv
    return result


def _result(status, error, workload, point, key, backend, device, environment, started_at, metrics, valid,
            invalid_reasons, samples=None) -> RunResult:
    """The RunResult every synthetic maker returns (finished when it started; valid only if ok)."""
    return RunResult(
        status=status, error=error, workload_file=f"workloads/{workload}.yaml", point=point,
        point_key=key, backend=backend, device=device, environment=environment,
        started_at=started_at, finished_at=started_at, samples=samples or {}, metrics=metrics,
        validity={"valid": valid and status == "ok", "reasons": list(invalid_reasons)},
    )


def write_results(out_dir: str | Path, specs: Iterable[dict[str, Any]]) -> list[Path]:
    """One result file per spec (keyword arguments of `make_result`)."""
    return [write_result(make_result(**spec), out_dir) for spec in specs]


def results_frame(*results: RunResult):
    """What load_results returns for these results, without touching the disk."""
    import pandas as pd

    return pd.DataFrame([flatten(r, f"r{i}.json") for i, r in enumerate(results)])


def serve_metrics(*, window_s: float, prompt_tokens: int, completion_tokens: int, share_in: float,
                  requests: int, ttft_s: float, tpot_s: float, rel_half_width: float = 0.02,
                  ttft_p99_s: float | None = None, tpot_p99_s: float | None = None,
                  interactivity_tokens_per_s: float | None = None, failure_rate: float = 0.0,
                  goodput_share: float = 1.0) -> dict[str, float]:
    """The metrics of a serve result (module docstring), latencies summarised over requests."""
    r = rel_half_width
    e2e_s = ttft_s + tpot_s * (completion_tokens / requests - 1)
    metrics: dict[str, float] = {}
    p99s = {"ttft": ttft_p99_s, "tpot": tpot_p99_s, "itl": tpot_p99_s, "e2e": None}
    means = {"ttft": ttft_s, "tpot": tpot_s, "itl": tpot_s, "e2e": e2e_s}
    for name in LATENCY_METRICS:
        for stat, value in latency_summary(means[name], r, p99s[name]).items():
            metrics[f"{name}_cv" if stat == "cv" else f"{name}_{stat}_s"] = value
    per_token = {
        "input_s_per_token": window_s * share_in / prompt_tokens,
        "output_s_per_token": window_s * (1 - share_in) / completion_tokens,
        "blended_s_per_token": window_s / (prompt_tokens + completion_tokens),
        "output_tokens_per_s": completion_tokens / window_s,
    }
    for name, value in per_token.items():
        metrics.update({name: value, f"{name}_ci95_low": value * (1 - r), f"{name}_ci95_high": value * (1 + r)})
    metrics.update({
        "input_tokens_per_s": prompt_tokens / window_s,
        "total_tokens_per_s": (prompt_tokens + completion_tokens) / window_s,
        "requests_per_s": requests / window_s,
        "goodput_requests_per_s": requests * goodput_share / window_s,
        "interactivity_tokens_per_s": (1 / tpot_s if interactivity_tokens_per_s is None
                                       else interactivity_tokens_per_s),
        "failure_rate": failure_rate,
        "duration_s": window_s,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "completed_requests": requests,
    })
    return metrics


def make_serve_result(*, accelerator: str = "NVIDIA H100 80GB HBM3", device: str = "cuda", chips: int = 1,
                      backend: str = "openai", workload: str = "synthetic", scale: str | None = "full",
                      family: str | None = "qwen3_moe", server_name: str = "vllm",
                      server_version: str | None = "0.11.0", concurrency: int | None = 8,
                      request_rate: float | None = None, input_length: int | None = 1024,
                      output_length: int | None = 128, window_s: float = 10.0, prompt_tokens: int = 1000,
                      completion_tokens: int = 3000, share_in: float = 0.2, requests: int | None = None,
                      ttft_s: float = 0.1, tpot_s: float = 0.01, rel_half_width: float = 0.02,
                      ttft_p99_s: float | None = None, tpot_p99_s: float | None = None,
                      interactivity_tokens_per_s: float | None = None, valid: bool = True,
                      invalid_reasons: Iterable[str] = (), status: str = "ok", error: str | None = None,
                      seed: int = 0, host: str = "synthetic-client",
                      started_at: str = "2026-12-01T00:00:00+00:00") -> RunResult:
    """A RunResult of scenario serve: the point's load (a concurrency or a request rate) under
    `point.params.load`, the server's stack and chips in its environment, no batch size."""
    requests = requests or max(1, completion_tokens // (output_length or 100))
    load = {"concurrency": concurrency} if request_rate is None else {"request_rate": request_rate}
    point = {
        "workload": workload, "scale": scale, "family": family, "hub_id": None, "weights": None,
        "trust_remote_code": False, "dtype": None, "experts_implementation": None, "model_config": {},
        "batch_size": None, "input_length": input_length, "output_length": output_length,
        "execution_mode": None, "scenario_kind": "serve",
        "params": {"load": load, "endpoint": "completions", "server": {"name": server_name}},
        "compile_options": {}, "measurement": {},
    }
    environment = {
        "accelerator_name": accelerator, "chips": chips, "hostname": host, "tpubench": "0.1.0",
        "git_revision": "synthetic", "server_name": server_name, "server_version": server_version,
    }
    metrics: dict[str, Any] = {}
    if status == "ok":
        metrics = serve_metrics(window_s=window_s, prompt_tokens=prompt_tokens,
                                completion_tokens=completion_tokens, share_in=share_in, requests=requests,
                                ttft_s=ttft_s, tpot_s=tpot_s, rel_half_width=rel_half_width,
                                ttft_p99_s=ttft_p99_s, tpot_p99_s=tpot_p99_s,
                                interactivity_tokens_per_s=interactivity_tokens_per_s)
    key = f"serve-{workload}-{scale}-{server_name}-{accelerator}-{chips}-{load}-i{input_length}-o{output_length}-{seed}"
    return _result(status, error, workload, point, key, backend, device, environment, started_at, metrics,
                   valid, invalid_reasons)


def write_serve_results(out_dir: str | Path, specs: Iterable[dict[str, Any]]) -> list[Path]:
    """One serve result file per spec (keyword arguments of `make_serve_result`)."""
    return [write_result(make_serve_result(**spec), out_dir) for spec in specs]


def train_metrics(*, batch_size: int, sequence_length: int, world_size: int, gradient_accumulation: int,
                  step_s: float, rel_half_width: float = 0.02, mfu: float = 0.4, loss_first: float = 11.0,
                  loss_last: float = 9.5, iterations: int = 10) -> dict[str, float]:
    """The metrics of a train result (module docstring)."""
    r = rel_half_width
    tokens_per_step = batch_size * sequence_length * world_size * gradient_accumulation
    rate = tokens_per_step / step_s
    metrics: dict[str, float] = {
        "step_mean_s": step_s, "step_p50_s": step_s, "step_stdev_s": step_s * r,
        "step_ci95_low_s": step_s * (1 - r), "step_ci95_high_s": step_s * (1 + r),
        "train_tokens_per_s_per_chip": rate / world_size,
        "mfu": mfu, "loss_first": loss_first, "loss_last": loss_last,
        "iterations": iterations, "train_tokens_per_step": tokens_per_step,
        "peak_memory_bytes": 20 * 2**30,
    }
    for name, value in (("train_tokens_per_s", rate), ("train_s_per_token", step_s / tokens_per_step)):
        metrics.update({name: value, f"{name}_ci95_low": value * (1 - r), f"{name}_ci95_high": value * (1 + r)})
    return metrics


def make_train_result(*, accelerator: str = "NVIDIA H100 80GB HBM3", device: str = "cuda",
                      chips: int | None = None, world_size: int = 1, fsdp: bool = False,
                      backend: str = "torch", workload: str = "synthetic_train", scale: str = "full",
                      family: str = "qwen3_moe", dtype: str = "bfloat16", execution_mode: str = "eager",
                      batch_size: int = 8, sequence_length: int = 1024, gradient_accumulation: int = 1,
                      step_s: float = 1.0, rel_half_width: float = 0.02, mfu: float = 0.4,
                      loss_first: float = 11.0, loss_last: float = 9.5, iterations: int = 10,
                      valid: bool = True, invalid_reasons: Iterable[str] = (), status: str = "ok",
                      error: str | None = None, seed: int = 0, host: str = "synthetic-host",
                      torch_version: str | None = "2.11.0", transformers_version: str | None = "5.0.0",
                      started_at: str = "2026-12-01T00:00:00+00:00") -> RunResult:
    """A RunResult of scenario train on a world of `world_size` data-parallel ranks (`chips`
    defaults to the world size, as on accelerators; on a CPU it is the vCPUs of all ranks)."""
    chips = world_size if chips is None else chips
    point = {
        "workload": workload, "scale": scale, "family": family, "hub_id": None, "weights": "random",
        "trust_remote_code": False, "dtype": dtype, "experts_implementation": None, "model_config": {},
        "batch_size": batch_size, "input_length": sequence_length, "output_length": None,
        "execution_mode": execution_mode, "scenario_kind": "train", "data_parallel": world_size,
        "params": {"gradient_accumulation": gradient_accumulation, "precision": "bf16_autocast",
                   "activation_checkpointing": False, "fsdp": fsdp,
                   "optimizer": {"name": "adamw", "lr": 1e-4}},
        "compile_options": {}, "measurement": {},
    }
    environment = {
        "accelerator_name": accelerator, "chips": chips, "world_size": world_size, "hostname": host,
        "torch": torch_version, "transformers": transformers_version, "tpubench": "0.1.0",
        "git_revision": "synthetic",
    }
    metrics: dict[str, Any] = {}
    if status == "ok":
        metrics = train_metrics(batch_size=batch_size, sequence_length=sequence_length, world_size=world_size,
                                gradient_accumulation=gradient_accumulation, step_s=step_s,
                                rel_half_width=rel_half_width, mfu=mfu, loss_first=loss_first,
                                loss_last=loss_last, iterations=iterations)
    key = (f"train-{workload}-{scale}-{accelerator}-{chips}-w{world_size}-b{batch_size}-s{sequence_length}"
           f"-g{gradient_accumulation}-{seed}")
    return _result(status, error, workload, point, key, backend, device, environment, started_at, metrics,
                   valid, invalid_reasons)


def write_train_results(out_dir: str | Path, specs: Iterable[dict[str, Any]]) -> list[Path]:
    """One train result file per spec (keyword arguments of `make_train_result`)."""
    return [write_result(make_train_result(**spec), out_dir) for spec in specs]

"""The report's MoE kernel table: results of one point that differ only in their arm, each arm's
decode speed-up over a baseline the table names in every row, with its 95% CI
(docs/definitions.md#kernel-speedups).

An arm is what a kernel A/B varies: the backend, its experts implementation (none named: the
framework's default), the kernel an arm named for a package ran (`moe.kernel`: `kernels` ran
sonicmoe, `tokamax` ran xla) and the decode loop (tpubench's own, or transformers' `generate()`).
Results are one group when everything else is the same: the point without its arm
(frames.arm_free_key: workload, scale, model, dtype, batch, lengths, routing, execution mode,
layout, ...), the device and the hardware. The baseline of a group is the torch `eager` experts
arm in tpubench's loop (the "eager loop"); where the group has no such arm that ran, its
`generate()` arm; else the group has no baseline and the table says so. An arm one backend skips
because the other measures it (one A/B workload run once per backend) is listed once, from the
backend that measured it; an arm skipped for its own reason (no kernel for the device) is listed
with that reason.

    speed-up = baseline mean TPOT / arm mean TPOT          (above 1: the arm decodes faster)

Pure: `speedups(results)` is computed once per report (report/data.py); the renderers format it.
"""

from __future__ import annotations

import math

import pandas as pd

from tpubench.measure.stats import ratio_with_uncertainty, verdict
from tpubench.output.report.format import PACKAGE_ARMS, hardware_label, point_label, validity_label, workload_label
from tpubench.records.columns import records
from tpubench.records.usable import row_is_usable
from tpubench.scenarios.registry import SCENARIOS
from tpubench.units import MISSING, finite, ms, sig, with_ci
from tpubench.workload_spec.point import DEFAULT_KIND, layout_words
from tpubench.workload_spec.vocabulary import HF_GENERATE, JAX_EXPERTS, TORCH_EXPERTS

EAGER_LOOP = "eager loop"     # how the table names the torch eager experts arm in tpubench's loop
# The baseline arm's backend and experts implementation (in tpubench's own decode loop).
BASELINE_BACKEND, BASELINE_EXPERTS = "torch", "eager"
MAX_GROUPS = 40
# The columns of a result that make its arm, blanked to label the group the arm belongs to.
ARM_COLUMNS = ["experts_implementation", "experts_kernel", "decode_loop"]
GROUP_COLUMNS = ["arm_free_key", "device", "accelerator", "chips"]
HEADERS = ["Arm", "TPOT ms", "Decode tok/s", "Speed-up (baseline named)", "Verdict", "Validity"]
NUMERIC = {1, 2}
NOTE = ("Speed-up = the baseline's mean TPOT / the arm's (decode speed; above 1: the arm decodes faster), its "
        "95% CI from the two TPOT CIs (relative half-widths in quadrature, as `tpubench compare`). The baseline "
        f"of each point: the torch eager experts implementation in tpubench's decode loop (\"{EAGER_LOOP}\"); where "
        "the point has none that ran, the arm whose decode ran through transformers' generate(); otherwise none. "
        "An arm: backend, experts implementation (default: the framework's), the kernel a package arm ran "
        "(in brackets) and generate() when transformers' generate() ran the decode "
        "(docs/definitions.md#kernel-speedups).")


def _text(value) -> str | None:
    """A cell's text, None for an absent one (None, NaN, '')."""
    try:
        if value is None or pd.isna(value):
            return None
    except (TypeError, ValueError):   # a list or array: not a cell this table reads
        pass
    return str(value) or None


def _is_false(value) -> bool:
    """A flag that is set and false (numpy's False included; None and NaN: unknown)."""
    return _text(value) is not None and not bool(value)


def is_generate(row) -> bool:
    """Whether transformers' generate() ran the row's decode (params.decode_loop)."""
    return _text(row.get("decode_loop")) == HF_GENERATE


def is_eager_loop(row) -> bool:
    """The baseline arm: torch's eager experts implementation (a Python loop over experts) in
    tpubench's own decode loop."""
    return (row.get("backend") == BASELINE_BACKEND and row.get("experts_implementation") == BASELINE_EXPERTS
            and not is_generate(row))


def arm_backend(row) -> str | None:
    """The backend an arm is measured on: jax for the JAX twin's formulations, torch for
    transformers' experts implementations and its generate() loop, None (either) for the
    framework's default, "neither" for a JAX formulation in generate()."""
    impl = _text(row.get("experts_implementation"))
    jax_arm, torch_arm = impl in JAX_EXPERTS, impl in TORCH_EXPERTS or is_generate(row)
    if jax_arm and torch_arm:   # a twin formulation in generate(): a sweep's cross product neither runs
        return "neither"
    return "jax" if jax_arm else "torch" if torch_arm else None


def handed_off(row) -> bool:
    """A result skipped because its arm is the other backend's (scenarios/generate/arms.py: one
    A/B workload, run once per backend): the arm is listed from the backend that measured it."""
    owner = arm_backend(row)
    return row.get("status") == "skipped" and owner is not None and owner != row.get("backend")


def arm_label(row) -> str:
    """'torch grouped_mm', 'torch kernels (sonicmoe)', 'jax tokamax (xla)', 'torch default generate()'.
    A JAX result of a point naming a torch implementation ran the twin's default: 'jax default'."""
    impl = _text(row.get("experts_implementation"))
    if arm_backend(row) not in (None, "neither", row.get("backend")):   # another backend's implementation name
        impl = None
    parts = [str(row.get("backend")), impl or "default"]
    kernel = _text(row.get("experts_kernel"))
    if kernel and impl in PACKAGE_ARMS:   # which of a package's kernels ran (JAX's own arms name themselves)
        parts.append(f"({kernel})")
    if is_generate(row):
        parts.append("generate()")
    return " ".join(parts)


def group_label(row) -> str:
    """The point the group's arms share: 'qwen3_moe (small) B=64 I=128 O=32 bfloat16 eager
    routing=uniform tp2'."""
    shared = {k: v for k, v in row.items() if k not in ARM_COLUMNS}
    layout = {k: int(row[k]) for k in ("tensor_parallel", "expert_parallel", "data_parallel") if finite(row.get(k))}
    return " ".join([workload_label(row), point_label(shared), *layout_words(layout)])


def _one_per_arm(group: list[dict]) -> list[dict]:
    """One result per arm: the latest that ran, else the latest (a point measured again, --all-runs)."""
    latest_first = sorted(group, key=lambda r: _text(r.get("started_at")) or "", reverse=True)
    chosen: dict[str, dict] = {}
    for r in sorted(latest_first, key=lambda r: r["status"] != "ok"):   # stable: latest first within each
        chosen.setdefault(r["arm"], r)
    return list(chosen.values())


def choose_baseline(arms: list[dict]) -> dict | None:
    """The group's baseline among results that ran: the eager loop; else the generate() arm (the
    one with the framework's default experts implementation first: what a generate() user gets,
    then eager, then by name); else None."""
    ran = [r for r in arms if r["status"] == "ok"]
    eager = [r for r in ran if is_eager_loop(r)]
    if eager:
        return eager[0]
    generate = [r for r in ran if is_generate(r)]

    def rank(r):
        impl = _text(r.get("experts_implementation")) or ""
        return (0 if not impl else 1 if impl == "eager" else 2, impl)
    return min(generate, key=rank) if generate else None


def speedup(baseline, arm) -> tuple[float, float, float]:
    """(speed-up, CI low, CI high): baseline mean TPOT over the arm's, the interval from each TPOT's
    95% CI half-width (stats.ratio_with_uncertainty, the rule `compare` and the cost verdicts use,
    so the report and `compare` agree on the same pair). Both TPOTs come from up to a few dozen
    iterations with CIs of a few percent, where a Fieller interval would differ from this one in
    the third significant figure; NaN bounds where a CI is missing."""
    b, a = baseline.get("tpot_mean_s"), arm.get("tpot_mean_s")
    if not (finite(a) and finite(b)) or float(a) <= 0:
        return math.nan, math.nan, math.nan
    ratio, half = ratio_with_uncertainty(float(b), _half(baseline), float(a), _half(arm))
    if not math.isfinite(half):
        return ratio, math.nan, math.nan
    return ratio, ratio - half, ratio + half


def _half(row) -> float:
    low, high = row.get("tpot_ci95_low_s"), row.get("tpot_ci95_high_s")
    return (float(high) - float(low)) / 2 if finite(low) and finite(high) else math.nan


# What the table reads of a result (the frame is wide: the rest is left behind before grouping).
_READ = GROUP_COLUMNS + ARM_COLUMNS + [
    "status", "error", "valid", "invalid_reasons", "backend", "file", "started_at", "scenario_kind",
    "workload", "scale", "dtype", "execution_mode", "routing", "batch_size", "input_length", "output_length",
    "tensor_parallel", "expert_parallel", "data_parallel", "generate_decode_experts",
    "tpot_mean_s", "tpot_ci95_low_s", "tpot_ci95_high_s",
    "decode_tokens_per_s", "decode_tokens_per_s_ci95_low", "decode_tokens_per_s_ci95_high"]
_SHOWN = ("tpot_mean_s", "tpot_ci95_low_s", "tpot_ci95_high_s", "decode_tokens_per_s",
          "decode_tokens_per_s_ci95_low", "decode_tokens_per_s_ci95_high")


def speedups(results: pd.DataFrame) -> pd.DataFrame:
    """One row per arm of every group with two arms or more (any status: an arm that was skipped
    or failed is listed with its reason) where some arm names an experts implementation or the
    generate() loop: the group's label and hardware, the arm, its TPOT and decode tokens/s with
    their CIs, the baseline's label (None: the group has no baseline), the speed-up and its CI,
    the verdict, the arm's and the baseline's validity. Groups in a stable order (workload, scale,
    hardware, point); in a group the baseline first, then arms by speed-up, then arms that did not run."""
    needed = set(GROUP_COLUMNS) | {"status", "backend", "experts_implementation"}
    if results.empty or not needed <= set(results.columns):
        return pd.DataFrame()
    narrow = results[[c for c in _READ if c in results.columns]]
    # Only rows sharing their group's key (the text of GROUP_COLUMNS, as below) can make a group of two
    # arms or more: reading every other row one by one took most of a 10,000-file report's time here.
    text = narrow[GROUP_COLUMNS].apply(lambda column: column.map(str))
    # Nor can a group none of whose results names an experts implementation or a decode loop
    # (`named` below): a sweep of ordinary points (10,000 results) has no such group at all.
    arm_named = narrow[[c for c in ("experts_implementation", "decode_loop") if c in narrow]].apply(
        lambda column: column.map(_text)).notna().any(axis=1)
    named_group = arm_named.groupby([text[c] for c in GROUP_COLUMNS], sort=False).transform("any")
    narrow = narrow[text.duplicated(keep=False) & named_group]
    groups: dict[tuple, list[dict]] = {}
    for r in records(narrow):
        if not _kernel_arms(r) or _text(r["arm_free_key"]) is None or handed_off(r):
            continue
        r["arm"] = arm_label(r)
        groups.setdefault(tuple(str(r[c]) for c in GROUP_COLUMNS), []).append(r)
    out = []
    for key, group in groups.items():
        arms = _one_per_arm(group)
        named = any(_text(r.get("experts_implementation")) or _text(r.get("decode_loop")) for r in arms)
        if len(arms) >= 2 and named:
            out.append(_group_rows("|".join(key), arms))
    out.sort(key=lambda rows: _group_order(rows[0]))
    return pd.DataFrame([r for rows in out for r in rows])


def _kernel_arms(row) -> bool:
    """Whether the row's scenario makes kernel A/B arms (Scenario.kernel_arms); a kind this version
    does not know makes none."""
    scenario = SCENARIOS.get(_text(row.get("scenario_kind")) or DEFAULT_KIND)
    return scenario is not None and scenario.kernel_arms


def _group_order(row) -> tuple:
    """Groups by workload, scale, hardware, then the point (numbers as numbers)."""
    def num(v):
        return float(v) if finite(v) else math.inf
    return (str(row["workload"]), str(row["scale"]), row["hardware"], str(row["dtype"]), str(row["execution_mode"]),
            str(row["routing"]), num(row["batch_size"]), num(row["input_length"]), num(row["output_length"]),
            row["group"])


def _group_rows(group_id: str, arms: list[dict]) -> list[dict]:
    """The table rows of one group (speedups' columns): the baseline first, then by speed-up
    (fastest first), arms without one after, arms that did not run last."""
    first = arms[0]
    base = choose_baseline(arms)
    base_name = None if base is None else (EAGER_LOOP if is_eager_loop(base) else base["arm"])
    shared = {"group_id": group_id, "group": group_label(first), "hardware": hardware_label(first),
              **{c: first.get(c) for c in ("workload", "scale", "dtype", "execution_mode", "routing", "batch_size",
                                           "input_length", "output_length")}}
    rows = []
    for r in arms:
        ok = r["status"] == "ok"
        is_base = r is base
        ratio, low, high = speedup(base, r) if ok and base is not None else (math.nan,) * 3
        half = (high - low) / 2 if finite(low) else math.nan
        rows.append({
            **shared, "arm": r["arm"], "backend": r["backend"], "status": r["status"],
            "reason": _text(r.get("error")), "file": r.get("file"),
            "valid": row_is_usable(r), "invalid_reasons": _text(r.get("invalid_reasons")),
            **{c: r.get(c, math.nan) for c in _SHOWN},
            "generate_decode_experts": _text(r.get("generate_decode_experts")),
            "baseline": base_name, "is_baseline": is_base,
            "baseline_valid": None if base is None else row_is_usable(base),
            "speedup": 1.0 if is_base else ratio, "speedup_ci95_low": math.nan if is_base else low,
            "speedup_ci95_high": math.nan if is_base else high,
            "verdict": ("baseline" if is_base else verdict(ratio, half) if finite(half) else
                        "no CI" if finite(ratio) else None),
        })
    rows.sort(key=lambda r: (0 if r["is_baseline"] else 1 if r["status"] == "ok" and finite(r["speedup"])
                             else 2 if r["status"] == "ok" else 3,
                             -r["speedup"] if finite(r["speedup"]) else 0.0, r["arm"]))
    return rows


def times(ratio, low, high) -> str:
    """'1.41x (1.32–1.50)': a speed-up and its 95% CI, the ratio alone where the CI is missing."""
    if not finite(ratio):
        return MISSING
    return f"{sig(ratio)}x" + (f" ({sig(low)}–{sig(high)})" if finite(low) and finite(high) else "")


def statement(row) -> str:
    """The speed-up cell, naming the baseline: 'torch grouped_mm vs eager loop: 1.41x (1.32–1.50)',
    'eager loop: baseline', 'torch kernels: skipped: <why>'."""
    if row["status"] != "ok":
        reason = _text(row["reason"])
        return f"{row['arm']}: {row['status']}" + (f": {reason}" if reason else "")
    if row["is_baseline"]:
        return f"{row['baseline']}: baseline"
    if _text(row["baseline"]) is None:      # the group's note says why, once (no_baseline_note)
        return f"{row['arm']}: no baseline"
    if not finite(row["speedup"]):
        return f"{row['arm']} vs {row['baseline']}: {MISSING} (no TPOT)"
    return f"{row['arm']} vs {row['baseline']}: {times(row['speedup'], row['speedup_ci95_low'], row['speedup_ci95_high'])}"


NO_BASELINE = (f"No speed-up: this point has no {EAGER_LOOP} (torch eager in tpubench's loop) or generate() arm "
               "that ran; `tpubench compare` pairs any two of its results.")


def no_baseline_note(group: pd.DataFrame) -> str | None:
    """What a group without a baseline says once, under its title (its rows only say 'no baseline')."""
    return NO_BASELINE if group["baseline"].map(_text).isna().all() else None


def _validity(row) -> str:
    if row["status"] != "ok":
        return row["status"]
    text = validity_label(row)
    if _is_false(row["baseline_valid"]) and not row["is_baseline"]:
        text += "; baseline INVALID"
    return text


def _arm_cell(row) -> str:
    switch = _text(row["generate_decode_experts"])
    return row["arm"] + (f" (generate() would decode with {switch})" if switch else "")


def cells(row) -> list[str]:
    """One table row: the arm, its TPOT and decode tokens/s with CIs, the speed-up naming its
    baseline, the verdict, validity."""
    return [_arm_cell(row), with_ci(row["tpot_mean_s"], row["tpot_ci95_low_s"], row["tpot_ci95_high_s"], ms),
            with_ci(row["decode_tokens_per_s"], row["decode_tokens_per_s_ci95_low"],
                    row["decode_tokens_per_s_ci95_high"]),
            statement(row), _text(row["verdict"]) or MISSING, _validity(row)]


def is_marked(row) -> bool:
    """Whether the row is marked invalid: the arm ran but is invalid, or its baseline is."""
    return row["status"] == "ok" and (not row["valid"] or (_is_false(row["baseline_valid"]) and not row["is_baseline"]))


def _groups(table: pd.DataFrame):
    """(title, rows) per group, at most MAX_GROUPS, and how many were left out."""
    groups = list(table.groupby("group_id", sort=False))
    return [(f"{g.iloc[0]['group']} · {g.iloc[0]['hardware']}", g) for _, g in groups[:MAX_GROUPS]], \
        max(0, len(groups) - MAX_GROUPS)


TITLE = "MoE kernels: decode speed-up per arm over a named baseline"


def _left_out(n: int) -> str:
    return (f"… {n} more point(s) with several arms are not shown (the first {MAX_GROUPS} are); "
            "`tpubench compare` pairs any two of their results.")


def markdown(table: pd.DataFrame, render) -> list[str]:
    """The section's markdown lines ([] when no group has two arms); `render` renders a table."""
    if table is None or table.empty:
        return []
    groups, left_out = _groups(table)
    out = [f"## {TITLE}", ""]
    for title, g in groups:
        note = no_baseline_note(g)
        out += [f"### {title}", "", *([note, ""] if note else []), render(HEADERS, [cells(r) for _, r in g.iterrows()]), ""]
    if left_out:
        out += [_left_out(left_out), ""]
    return out + [f"- {NOTE}", ""]


def html(table: pd.DataFrame, render, escape) -> list[str]:
    """The section's HTML parts ([] when no group has two arms); rows marked invalid as elsewhere."""
    if table is None or table.empty:
        return []
    groups, left_out = _groups(table)
    out = [f"<h2>{escape(TITLE)}</h2>"]
    for title, g in groups:
        out.append(f"<h3>{escape(title)}</h3>")
        note = no_baseline_note(g)
        if note:
            out.append(f'<p class="note">{escape(note)}</p>')
        out.append(render(HEADERS, [cells(r) for _, r in g.iterrows()], NUMERIC,
                          ["invalid" if is_marked(r) else "" for _, r in g.iterrows()],
                          {5: lambda v: "validity"}))
    if left_out:
        out.append(f'<p class="note">{escape(_left_out(left_out))}</p>')
    return out + [f'<p class="note">{escape(NOTE)}</p>']

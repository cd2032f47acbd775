"""What the reports show of a row: labels, cells and notes. Units come from tpubench.units (data
stays in seconds, bytes and USD until rendered)."""

from __future__ import annotations

import pandas as pd

# Plan labels have one source, the plan vocabulary: every report, the budget and `pricing list` use it.
from tpubench.money.plans import plan_label  # noqa: F401

# What produced a row's tokens, shared with the answer (output/answer), which sits beside the reports.
from tpubench.output.labels import present as _present  # noqa: F401
from tpubench.output.labels import stack_label  # noqa: F401
from tpubench.records import usable
from tpubench.scenarios.registry import SCENARIOS, describing

# The reports' unit formatters, used here and as `format.sig`, `format.usd`, ... by the renderers.
from tpubench.units import finite, ms, number, pct, share, sig, usd, usd_whole, with_ci  # noqa: F401
from tpubench.workload_spec.precision import Precision


def ci_cell(row, column: str) -> str:
    """`column` with its `_ci95_low` / `_ci95_high` companions."""
    return with_ci(row[column], row[f"{column}_ci95_low"], row[f"{column}_ci95_high"])


FLAG_MARK = "⚠ flagged price"


def is_flagged(row) -> bool:
    """Whether a priced row's price is flagged (pricing derives `price_flagged` when loading)."""
    value = row.get("price_flagged", False)
    return _present(value) and bool(value)


def platform_label(row) -> str:
    label = f"{row['priced_accelerator']} · {row['cloud']} {row['instance_type']} ({row['region']})"
    # Suspect catalog rows are kept as published, and marked wherever they are shown.
    if is_flagged(row):
        label += f" {FLAG_MARK}"
    return label


def flagged_price_notes(priced: pd.DataFrame) -> list[str]:
    """One line per flagged price row among `priced`: which instance and plan, and why."""
    if not len(priced) or "price_flagged" not in priced:
        return []
    flagged = priced[priced["price_flagged"].fillna(False).astype(bool)]
    rows = flagged.drop_duplicates(["cloud", "region", "instance_type", "plan"])
    return [f"{FLAG_MARK}: {r['cloud']} {r['instance_type']} ({r['region']}), {plan_label(r['plan'])}: "
            f"{r.get('price_flag_reason') or 'flagged'}" for _, r in rows.iterrows()]


def split_label(row) -> str:
    """How a row's input and output $/Mtok were split (its scenario's cost basis, cost.chip_seconds),
    with the reason when there is no split."""
    method = row.get("split_method")
    if not _present(method):
        return "–"
    note = row.get("split_note")
    return f"{method}: {note}" if method == "blended only" and _present(note) else str(method)


def workload_label(row) -> str:
    """'qwen3_moe (small)', or the workload alone when a result has no scale."""
    scale = row.get("scale")
    return f"{row['workload']} ({scale})" if _present(scale) else str(row["workload"])


def load_label(row) -> str:
    """How a point was loaded: its batch ('B=8'), else a server's concurrency ('C=32') or request
    rate ('4 req/s'), whichever columns the row has."""
    if _present(row.get("batch_size")):
        return f"B={number(row['batch_size'])}"
    if _present(row.get("concurrency")):
        return f"C={number(row['concurrency'])}"
    if _present(row.get("request_rate")):
        return f"{number(float(row['request_rate']))} req/s"
    return ""


def point_label(row) -> str:
    """'B=8 I=1024 O=128 bfloat16 eager', or for a server 'C=32 I=1024 O=128' (lengths left out
    when they were drawn rather than fixed)."""
    parts = [load_label(row)]
    for key, name in (("input_length", "I"), ("output_length", "O")):
        if _present(row.get(key)):
            parts.append(f"{name}={number(row[key])}")
    for key in ("dtype", "execution_mode"):
        if _present(row.get(key)):
            parts.append(str(row[key]))
    parts += precision_words(row) + arm_words(row)
    return " ".join(p for p in parts if p)


def precision_words(row) -> list[str]:
    """['q=int8_dynamic (w int8 / a int8 / kv f32)'] for a quantised row; [] otherwise."""
    q = row.get("quantization")
    if not _present(q) or q in ("", "none"):
        return []
    dtypes = [row.get(k) for k in ("weight_dtype", "activation_dtype", "kv_cache_dtype")]
    if all(_present(d) for d in dtypes):
        return [f"q={q} ({Precision(*map(str, dtypes)).label()})"]
    return [f"q={q}"]


# Experts arms named for a package whose kernel is chosen per device (models/hub_kernels.py,
# models/jax_experts.py): their labels say which kernel ran.
PACKAGE_ARMS = ("kernels", "tokamax")


def arm_words(row) -> list[str]:
    """The arm of a MoE kernel A/B in words ('experts=kernels (sonicmoe)', 'loop=generate()',
    'routing=uniform'): rows differing only in it must read apart."""
    words = []
    impl, kernel = row.get("experts_implementation"), row.get("experts_kernel")
    if _present(impl):
        words.append(f"experts={impl}" + (f" ({kernel})" if _present(kernel) and impl in PACKAGE_ARMS else ""))
    if _present(row.get("decode_loop")):
        words.append("loop=generate()")
    if _present(row.get("routing")) and row["routing"] != "natural":
        words.append(f"routing={row['routing']}")
    return words


def hardware_label(row) -> str:
    return f"{row['accelerator']} ×{number(row['chips'])}"


def kind_label(row) -> str:
    """How reports name a row's kind of stack: its scenario's report_kind ('offline' for a batch
    tpubench ran itself, 'serve' for a server under load)."""
    kind = row.get("scenario_kind")
    known = SCENARIOS.get(kind) if _present(kind) else describing(None)
    return known.report_kind if known else str(kind)


def software_label(row) -> str:
    if _present(row.get("server_name")):
        return f"{stack_label(row)} ({kind_label(row)})"
    parts = [f"{row['backend']}:{row['device']}"]
    for key, name in (("torch_version", "torch"), ("transformers_version", "transformers"),
                      ("jax_version", "jax")):
        if _present(row.get(key)):
            parts.append(f"{name} {row[key]}")
    return " ".join(parts)


def validity_classes(rows) -> list[str]:
    """Each row's HTML class: 'invalid' for a point that is not usable (records/usable.py), else ''."""
    return ["" if fine else "invalid" for fine in usable.usable_mask(rows)]


def validity_label(row) -> str:
    """'valid', 'valid, noisy: CV 25.4%' or 'INVALID: reasons' (records/usable.py)."""
    if usable.row_is_usable(row):
        noise = usable.noise_label(row)
        return f"valid, {noise}" if noise else "valid"
    reasons = row.get("invalid_reasons")
    return "INVALID" + (f": {reasons}" if _present(reasons) else "")


SUMMARY_HEADERS = [
    "Platform", "Plan", "$/chip-h", "Price as of", "Input $/Mtok", "Output $/Mtok", "Blended $/Mtok", "vs cheapest",
    "InferenceX $/Mtok†", "Output tok/s/chip", "TTFT p50/p99 ms", "TPOT p50/p99 ms", "Point",
    "Hardware", "Software", "Validity", "Input/output split",
]


def summary_cells(row) -> list[str]:
    """The summary table's cells for one row of ReportData.summary."""
    return [
        platform_label(row),
        plan_label(row["plan"]),
        usd(row["usd_per_chip_hour"]),
        str(row["price_as_of"]),
        ci_cell(row, "input_usd_per_mtok"),
        ci_cell(row, "output_usd_per_mtok"),
        ci_cell(row, "blended_usd_per_mtok"),
        str(row.get("vs_cheapest", "")),
        ci_cell(row, "inferencex_usd_per_mtok"),
        ci_cell(row, "output_tokens_per_s_per_chip"),
        f"{ms(row['ttft_p50_s'])} / {ms(row['ttft_p99_s'])}",
        f"{ms(row['tpot_p50_s'])} / {ms(row['tpot_p99_s'])}",
        point_label(row),
        hardware_label(row),
        software_label(row),
        validity_label(row),
        split_label(row),
    ]


RUN_HEADERS = ["Workload", "Hardware", "Software", "Point", "Output tok/s/chip", "TTFT p50/p99 ms",
               "TPOT p50/p99 ms", "Prefill MFU / decode MBU", "Blended $/Mtok (cheapest {plan} price)",
               "Priced as", "Validity", "Input/output split"]


def run_cells(row) -> list[str]:
    return [
        workload_label(row),
        hardware_label(row),
        software_label(row),
        point_label(row),
        ci_cell(row, "output_tokens_per_s_per_chip"),
        f"{ms(row['ttft_p50_s'])} / {ms(row['ttft_p99_s'])}",
        f"{ms(row['tpot_p50_s'])} / {ms(row['tpot_p99_s'])}",
        f"{share(row.get('prefill_mfu'))} / {share(row.get('decode_mbu'))}",
        ci_cell(row, "blended_usd_per_mtok"),
        f"{row['cloud']} {row['instance_type']} ({row['region']}), {plan_label(row['plan'])}"
        + (f" {FLAG_MARK}" if is_flagged(row) else ""),
        validity_label(row),
        split_label(row),
    ]


METHOD_NOTES = [
    "Input/Output/Blended $/Mtok are time-attributed (tpubench's method): prefill chip-seconds over "
    "input tokens, decode chip-seconds over output tokens, all chip-seconds over all tokens. "
    "A server under load (serve) is priced as its chips over the measured window: blended = chip-seconds "
    "of the window over all its tokens. Its input/output split is fitted (chips = c_in × input tokens/s + "
    "c_out × output tokens/s, non-negative least squares) over points of the same server and load measured "
    "at different input/output mixes ('probe fit over N points'); without such probes only blended is "
    "priced ('blended only', with the reason). Offline batches split by prefill and decode time "
    "('time-attributed').",
    "† InferenceX-compatible: the whole chip-hour charged to output tokens "
    "(price per chip-hour × 1e6 / (3600 × output tokens/s per chip)), for comparison with published tables. "
    "Its price is the row's own: the cloud, instance and region in Platform, the Plan, the $/chip-h column "
    "(a plan with an upfront part at its effective price), which is the price table's list price unless you "
    "layered your own (--prices, --discount); InferenceX itself prices with TCO tiers (hyperscaler, neocloud, "
    "3-year rental), not list prices, so equal throughput need not give its published $/Mtok.",
    "Brackets are 95% confidence intervals carried from the measured times and throughputs. "
    "'vs cheapest' compares blended cost with the cheapest platform of the same plan: "
    "cheaper, dearer or tie within noise.",
    f"{FLAG_MARK}: its source calls the price suspect (spot above on-demand, a lower bound...); a flagged "
    "row is used only where no unflagged row prices the same accelerator and plan, or with --include-flagged.",
]


# ----------------------------------------------------------------------------- training (section 17)


def train_point_label(row) -> str:
    """'B=8 S=1024 ×2 bfloat16 eager': sequences per rank per micro-step, sequence length, the world."""
    parts = [load_label(row)]
    if _present(row.get("input_length")):
        parts.append(f"S={number(row['input_length'])}")
    if _present(row.get("world_size")) and float(row["world_size"]) > 1:
        parts.append(f"×{number(row['world_size'])}")
    for key in ("dtype", "execution_mode"):
        if _present(row.get(key)):
            parts.append(str(row[key]))
    parts += arm_words(row)
    return " ".join(p for p in parts if p)


def loss_label(row) -> str:
    first, last = row.get("loss_first"), row.get("loss_last")
    if not (finite(first) or finite(last)):
        return "–"
    return " → ".join("–" if not finite(x) else f"{float(x):.4g}" for x in (first, last))


TRAINING_HEADERS = [
    "Platform", "Plan", "$/chip-h", "Price as of", "$/M training tokens", "vs cheapest",
    "Training tok/s/chip", "Step p50 ms", "MFU", "Loss first → last", "Point", "Hardware", "Software",
    "Validity",
]


def training_cells(row) -> list[str]:
    """The training table's cells for one row of ReportData.training."""
    return [
        platform_label(row),
        plan_label(row["plan"]),
        usd(row["usd_per_chip_hour"]),
        str(row["price_as_of"]),
        ci_cell(row, "train_usd_per_mtok"),
        str(row.get("vs_cheapest", "")),
        ci_cell(row, "train_tokens_per_s_per_chip"),
        ms(row.get("step_p50_s")),
        share(row.get("mfu")),
        loss_label(row),
        train_point_label(row),
        hardware_label(row),
        software_label(row),
        validity_label(row),
    ]


TRAINING_RUN_HEADERS = ["Workload", "Hardware", "Software", "Point", "Training tok/s/chip", "Step p50 ms",
                        "MFU", "Loss first → last", "$/M training tokens (cheapest {plan} price)", "Priced as",
                        "Validity"]


def training_run_cells(row) -> list[str]:
    return [
        workload_label(row),
        hardware_label(row),
        software_label(row),
        train_point_label(row),
        ci_cell(row, "train_tokens_per_s_per_chip"),
        ms(row.get("step_p50_s")),
        share(row.get("mfu")),
        loss_label(row),
        ci_cell(row, "train_usd_per_mtok"),
        f"{row['cloud']} {row['instance_type']} ({row['region']}), {plan_label(row['plan'])}"
        + (f" {FLAG_MARK}" if is_flagged(row) else ""),
        validity_label(row),
    ]


TRAINING_NOTES = [
    "$ per million training tokens = chip-seconds per training token (seconds of one optimizer step "
    "of the whole world per token it trains on × chips) × price per chip-second × 1e6; a training token "
    "is one token of one sequence in the global batch of a step (forward, backward and optimizer step).",
    "Training tok/s/chip = training tokens/s of all ranks / chips. MFU = model FLOP/s / peak, "
    "6N + attention FLOPs per token (section 17; recomputation not counted).",
    "Brackets are 95% confidence intervals carried from the measured step times; 'vs cheapest' "
    "compares with the cheapest platform of the same plan. Inference $/Mtok tables never include training runs.",
]


def rent_label(row) -> str:
    """'1 × tpu-v6e-8 (4 replicas of 2 chips, 100% used)' for a training budget option."""
    replicas = int(row["replicas"])
    text = f"{number(row['instances'])} × {row['instance_type']} ({replicas} replica{'s' * (replicas != 1)} of " \
           f"{number(row['chips'])} chip{'s' * (float(row['chips']) != 1)}"
    return text + f", {float(row['utilisation']):.0%} of {number(row['rented_chips'])} used)"


def energy_month_label(row) -> str:
    """'1,230 kWh · $123 in the monthly cost' (or 'apart': a cloud's price includes energy),
    marked when the joules are modelled."""
    kwh = row.get("monthly_kwh")
    if not finite(kwh):
        return "–"
    text = f"{sig(kwh)} kWh"
    if finite(row.get("monthly_energy_usd")):
        where = "in the monthly cost" if bool(row.get("energy_in_monthly_usd")) else "apart"
        text += f" · {usd_whole(row['monthly_energy_usd'])} {where}"
    return text + (" (modelled)" if row.get("energy_method") == "modelled" else "")


def carbon_month_label(row) -> str:
    """'412 kg' of CO2e a month, or why there is no figure."""
    kg = row.get("monthly_kg_co2e")
    if finite(kg):
        return f"{sig(kg)} kg"
    return "unknown grid" if finite(row.get("monthly_kwh")) else "–"


ENERGY_HEADER = "Energy per token"


def energy_cell(row, figure: str = "blended") -> str:
    """'0.152 J · 5.56 gCO2e/Mtok' for a run measured with energy, marked when modelled."""
    joules = row.get(f"{figure}_j_per_token")
    if not finite(joules):
        return "–"
    carbon = row.get(f"{figure}_gco2e_per_mtok")
    text = f"{sig(joules)} J · " + (f"{sig(carbon)} gCO2e/Mtok" if finite(carbon) else "grid unknown")
    return text + (" (modelled)" if row.get("energy_method") == "modelled" else "")


CACHE_HEADER = "Cached input / KV peak"


def with_cache_column(runs, headers: list[str], cells):
    """A run table's headers and cell maker, with a server's prefix-cache share of its input and its
    engine's peak KV-cache usage (docs/scenarios/serve.md#what-the-engine-reports) when any run has them."""
    if not any(c in runs and runs[c].notna().any() for c in ("cached_input_share", "engine_kv_cache_usage_peak")):
        return headers, cells
    return headers + [CACHE_HEADER], lambda row: cells(row) + [
        f"{share(row.get('cached_input_share'))} / {share(row.get('engine_kv_cache_usage_peak'))}"]


def with_energy_column(runs, figure: str, headers: list[str], cells):
    """A run table's headers and cell maker, with the energy column added when any run has energy
    (docs/measurement.md#energy): a report of runs without energy looks as it always did; and the
    serving cache column (with_cache_column) likewise."""
    headers, cells = with_cache_column(runs, headers, cells)
    column = f"{figure}_j_per_token"
    if column not in runs or not runs[column].notna().any():
        return headers, cells
    return headers + [ENERGY_HEADER], lambda row: cells(row) + [energy_cell(row, figure)]

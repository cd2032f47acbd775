"""Errors a new user meets first (issue 50): each names the fix, in one line, fast. A misspelt
required key gets a did-you-mean instead of "required field is missing"; a misspelt scenario kind
names the kinds, not the whole block; an unknown family names the transformers that was asked; a
chip written `A100x8` is suggested as `A100:8`; a bad `--on` is refused before pandas, prices,
results or a calibration are loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from helpers_cli import click_command, run_cli, validate  # noqa: F401 (fixtures)

from tpubench.estimate.chips import Offers, parse_target
from tpubench.money.pricing import load_prices

REPO = Path(__file__).resolve().parents[1]
QWEN_MOE = REPO / "workloads" / "qwen3_moe.yaml"
EXAMPLES = REPO / "examples" / "results"


def edited(tmp_path: Path, old: str, new: str) -> Path:
    text = QWEN_MOE.read_text()
    assert old in text
    path = tmp_path / "w.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_misspelt_required_key_gets_a_did_you_mean(tmp_path, validate):
    code, err = validate(edited(tmp_path, "  batch_size: [1, 8, 32, 64]", "  batch_sizes: [1, 8, 32, 64]"))
    assert code == 2 and "scenario.batch_sizes: unknown key 'batch_sizes'; did you mean 'batch_size'?" in err


def test_a_misspelt_kind_names_the_kinds_not_the_block(tmp_path, validate):
    path = edited(tmp_path, "  kind: generate", "  kind: generation")
    code, err = validate(path)
    line = path.read_text().splitlines().index("  kind: generation") + 1
    assert code == 2
    assert err.startswith(f"error: {path}:{line}: scenario.kind: unknown kind 'generation'; did you mean 'generate'?")
    assert "batch_size" not in err and "input_length" not in err


def test_an_unknown_family_names_the_installed_transformers(tmp_path, validate):
    code, err = validate(edited(tmp_path, "  family: qwen3_moe ", "  family: lama "))
    assert code == 2
    assert f"not a model_type of transformers {version('transformers')}" in err and "did you mean 'llama'?" in err


@pytest.mark.parametrize("spec, hint", [("A100x8", "A100:8"), ("8xH100", "H100:8"), ("H100 x 8", "H100:8"),
                                        ("B2000", "B200"), ("trn3", "trn2"), ("h10", "H100")])
def test_a_chip_name_gets_the_nearest_spelling(spec, hint):
    with pytest.raises(Exception, match=f"did you mean '{hint}'") as info:
        parse_target(spec, Offers.shipped())
    assert "H100'" not in str(info.value) or hint.startswith("H100")


@pytest.mark.parametrize("spec", ["v6e-8", "H100:8", "trn2.48xlarge", "tpu7x-8", "ironwood", "GB200:4", "p5.48xlarge",
                                  "H100 80GB", "trn2", "v5p-8", "inf2", "L4", "a3-highgpu-8g", "mi300x:8", "H100:8@fp8"])
def test_the_shipped_offers_resolve_as_the_loaded_price_table_does(spec):
    # validate and the early --on check read the shipped table without pandas; estimate reads it loaded.
    assert parse_target(spec, Offers.shipped()) == parse_target(spec, load_prices())


def test_estimate_and_report_suggest_the_colon(monkeypatch, capsys):
    for args in (("estimate", str(QWEN_MOE)), ("report", str(EXAMPLES))):
        code, _, err = run_cli(monkeypatch, capsys, *args, "--on", "A100x8")
        assert code == 2 and "error: --on: unknown chip 'A100x8' (did you mean 'A100:8'?)" in err, err


PROBE = """
import contextlib, io, json, sys
from tpubench.cli import main
sys.argv = ['tpubench', *sys.argv[1:]]
code = 0
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps([code, sorted(sys.modules)]))
"""


@pytest.mark.parametrize("args", [("estimate", str(QWEN_MOE), "--on", "A100x8"),
                                  ("report", str(EXAMPLES), "--on", "tpu-v9z-8"),
                                  ("report", str(EXAMPLES), "--on", "H100:8", "--on", "Z9")])
@pytest.mark.slow   # a subprocess CLI
def test_a_bad_on_is_refused_before_anything_heavy_is_imported(args):
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 2
    assert not {m.split(".")[0] for m in modules} & {"pandas", "numpy", "torch", "transformers", "jax"}


@pytest.mark.slow   # a subprocess CLI
def test_validate_resolves_compare_on_without_pandas(tmp_path):
    # The shipped qwen3_moe names three compare_on chips: resolved from the CSV tables, no pandas.
    bad = edited(tmp_path, 'compare_on: [tpu-v6e-8, "H100:8", trn2]', 'compare_on: [tpu-v6e-8, "A100x8"]')
    for path, expected in ((QWEN_MOE, 0), (bad, 2)):
        done = subprocess.run([sys.executable, "-c", PROBE, "validate", str(path)], capture_output=True, text=True,
                              check=True)
        code, modules = json.loads(done.stdout.strip().splitlines()[-1])
        assert code == expected
        assert "tpubench.estimate.chips" in modules
        assert not {m.split(".")[0] for m in modules} & {"pandas", "numpy", "torch", "transformers", "jax"}

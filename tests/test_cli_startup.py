"""What CLI start-up imports (issue 34: `--help` and `validate` within 0.3 s, benchmarks/cli_startup.py):
plain `--help` imports no rich, and `validate` builds only its own kind's scenario package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"

PROBE = """
import contextlib, io, json, sys
from tpubench.cli import main
sys.argv = ['tpubench', *sys.argv[1:]]
code = 0
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps([code, sorted(sys.modules)]))
"""


def modules_after(*args: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return code, set(modules)


def test_help_imports_no_rich():
    code, modules = modules_after("--help")
    assert code == 0
    assert not {m for m in modules if m.split(".")[0] == "rich"}


def test_validate_imports_its_own_scenario_kind_only_and_no_rich():
    code, modules = modules_after("validate", str(WORKLOADS / "serve_local.yaml"))
    assert code == 0
    kinds = {m.split(".")[2] for m in modules if m.startswith("tpubench.scenarios.") and m.count(".") >= 2}
    packages = {k for k in kinds if k in ("generate", "serve", "train", "diffuse")}
    assert packages == {"serve"}
    assert not {m for m in modules if m.split(".")[0] in ("rich", "torch", "jax", "transformers", "pandas")}

"""Write the flags a vLLM build's `vllm serve` accepts, read from its own argument parser, as a
tpubench/data/engine_flags/*.json file that `tpubench validate` checks serving presets against
(tpubench/serving/engine_flags.py).

Run with a Python that can import the build's `vllm` package (its wheel unpacked on PYTHONPATH is
enough, with vLLM's Python dependencies installed; no accelerator is needed: VLLM_TARGET_DEVICE=cpu
picks a platform, and no platform adds flags of its own):

    pip download --no-deps --only-binary :all: --python-version 312 vllm-torchtpu==0.29.0
    unzip -q vllm_torchtpu-0.29.0-*.whl -d wheel
    VLLM_TARGET_DEVICE=cpu TORCH_DEVICE_BACKEND_AUTOLOAD=0 PYTHONPATH=wheel \\
        python scripts/engine_flags.py --engine vllm-torchtpu --version 0.29.0 \\
        --wheel vllm_torchtpu-0.29.0-cp312-cp312-manylinux_2_28_x86_64.whl \\
        --out tpubench/data/engine_flags/vllm-torchtpu-0.29.0.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from datetime import date
from pathlib import Path


def serve_parser():
    """vLLM's own `vllm serve` parser: make_arg_parser moved from vllm.entrypoints.openai.cli_args
    (0.11) to vllm.entrypoints.launchers.cli_args (0.29)."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def pin_cpu_platform() -> None:
    """Before vLLM's config modules load: its CPU platform, where a wheel unpacked on PYTHONPATH (no
    installed metadata) would leave it undetected. Platforms change defaults, not which flags exist
    (none of the builds read here adds flags in pre_register_and_update)."""
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--wheel", required=True, help="the wheel the parser was read from (named and hashed)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    pin_cpu_platform()
    parser = serve_parser()
    flags = sorted({s for action in parser._actions for s in action.option_strings if s.startswith("--")})
    wheel = Path(args.wheel)
    data = {
        "engine": args.engine, "version": args.version, "command": "vllm serve",
        "source": {"wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
                   "parser": "make_arg_parser(FlexibleArgumentParser()) of the wheel's vllm, every option string",
                   "read_on": date.today().isoformat(),
                   "platform": os.environ.get("VLLM_TARGET_DEVICE", "") or "detected"},
        "flags": flags,
    }
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"{len(flags)} flags -> {args.out}")


if __name__ == "__main__":
    main()

"""The flags a serving engine's own command-line parser accepts, read from its released wheel
(tpubench/data/engine_flags/*.json, written by scripts/engine_flags.py), so that a preset's flag
the engine would refuse fails at `tpubench validate`, not minutes into a server's start-up.

Kept light (json and difflib only): `validate` imports it.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "data" / "engine_flags"
# The preset -> the flag list it is checked against (the engine release the preset was checked on).
CHECKED = {"vllm-torchtpu": "vllm-torchtpu-0.29.0.json", "vllm-neuron": "vllm-neuron-0.2.0.json"}


@lru_cache(maxsize=None)
def engine_flags(preset: str) -> dict | None:
    """The stored flag list of a preset's engine ({engine, version, source, flags}), or None."""
    name = CHECKED.get(preset)
    return json.loads((FOLDER / name).read_text(encoding="utf-8")) if name else None


def flag_name(token: str) -> str | None:
    """The long flag a command-line word names (`--max_model_len=8` -> `--max-model-len`), or None
    for a value. vLLM's parser takes underscores for dashes and `--config-name.key` for a nested key."""
    if not token.startswith("--") or token == "--":
        return None
    name = token.split("=", 1)[0].split(".", 1)[0]
    return "--" + name[2:].replace("_", "-")


def unknown_flags(preset: str, argv: list[str]) -> list[tuple[str, str | None]]:
    """The flags in `argv` the preset's engine does not accept, each with the nearest it does
    (None when nothing is close); [] for a preset whose engine has no stored list."""
    data = engine_flags(preset)
    if data is None:
        return []
    known = set(data["flags"])
    out = []
    for token in argv:
        name = flag_name(str(token))
        if name is not None and name not in known:
            near = difflib.get_close_matches(name, data["flags"], n=1, cutoff=0.75)
            out.append((name, near[0] if near else None))
    return out


def refusal(preset: str, argv: list[str]) -> str | None:
    """Why the engine would refuse this command line, naming the release checked against; None if it would not."""
    unknown = unknown_flags(preset, argv)
    if not unknown:
        return None
    data = engine_flags(preset)
    words = "; ".join(f"{name}" + (f" (did you mean {near}?)" if near else "") for name, near in unknown)
    return (f"{data['engine']} {data['version']}'s `{data['command']}` accepts no {words} (flags read from its "
            f"own parser, {data['source']['wheel']}); to pass flags of another release, give launch.command")

"""Rebuild tpubench's shipped published rows (tpubench/data/published/*.csv) from local git copies
of the public repositories they come from. One command, one diff:

    python scripts/published/regenerate.py --mirrors /path/to/mirrors          # rewrite the CSVs
    python scripts/published/regenerate.py --mirrors /path/to/mirrors --check  # exit 1 on any change

Each source module (SOURCES below) pins the repositories and commits it reads and returns one
DataFrame per CSV it owns; this driver writes them as `tpubench import` writes an import
(published.store: exactly its columns, `%.9g`), so the bytes depend only on the sources. Nothing is
fetched here: clone or fetch the repositories first (git_mirror.open_mirror says how).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO_ROOT))

# One module per public source, each with `build(mirrors: Path) -> dict[str, DataFrame]` (CSV
# file name -> rows) and `REPOS` (owner/name -> commit) it reads.
SOURCES = ("mlperf", "inferencex", "tpu_recipes", "neuron", "amd", "sglang_jax", "trtllm", "optimum_neuron", "jetstream")
SHIPPED = REPO_ROOT / "tpubench" / "data" / "published"


def csv_bytes(frame) -> bytes:
    """The bytes a shipped CSV holds for `frame`: published.store's own writer (columns, neutralised
    text, %.9g floats)."""
    from tpubench.output.published.rows import COLUMNS
    from tpubench.records.csv_safety import neutralize_frame

    return neutralize_frame(frame.reindex(columns=COLUMNS)).to_csv(index=False, float_format="%.9g").encode("utf-8")


def build_all(mirrors: Path, only: list[str] | None = None) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name in only or SOURCES:
        module = importlib.import_module(name)
        for csv_name, frame in module.build(mirrors).items():
            if csv_name in out:
                raise SystemExit(f"two sources write {csv_name}")
            out[csv_name] = csv_bytes(frame)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, required=True, help="folder holding the git copies")
    parser.add_argument("--into", type=Path, default=SHIPPED, help="where the CSVs go (default: the shipped folder)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a CSV would change")
    parser.add_argument("--source", action="append", choices=SOURCES, help="only these sources (repeatable)")
    args = parser.parse_args(argv)
    from git_mirror import MirrorMissing

    try:
        built = build_all(args.mirrors, args.source)
    except MirrorMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = []
    for csv_name, data in sorted(built.items()):
        target = args.into / csv_name
        old = target.read_bytes() if target.exists() else None
        rows = data.count(b"\n") - 1
        state = "same" if old == data else ("new" if old is None else "changed")
        print(f"{csv_name}: {rows} rows, {state}")
        if state != "same":
            changed.append(csv_name)
            if not args.check:
                args.into.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".tmp-{csv_name}")
                tmp.write_bytes(data)
                tmp.replace(target)
    if not args.source:
        stale = sorted(p.name for p in args.into.glob("*.csv") if p.name not in built)
        for name in stale:
            print(f"{name}: no source builds it any more")
        changed += stale
    if args.check and changed:
        print(f"would change: {', '.join(changed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

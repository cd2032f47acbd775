"""How long tpubench's functions are and how many parameters they take: the figures issue reviews
quote before and after a refactor (beside the `duplicates` tool's count).

    python benchmarks/code_shape.py [PACKAGE_DIR]    # default: tpubench/ of this checkout
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def functions(root: Path) -> list[tuple[int, int, str]]:
    """(lines, parameters, 'file:line name') of every function and method under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"
                out.append((node.end_lineno - node.lineno + 1, len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs),
                            where))
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else ROOT / "tpubench"
    found = functions(root)
    lengths = sorted(n for n, _, _ in found)
    print(f"{len(found)} functions: lines mean {statistics.mean(lengths):.1f}, median {statistics.median(lengths):.0f}, "
          f"p95 {lengths[int(0.95 * len(lengths))]}, max {lengths[-1]}; over 50 lines {sum(n > 50 for n in lengths)}, "
          f"over 80 {sum(n > 80 for n in lengths)}")
    print("longest:", ", ".join(f"{w} ({n})" for n, _, w in sorted(found, reverse=True)[:5]))
    by_params = sorted(((p, w) for _, p, w in found), reverse=True)
    print(f"parameters: max {by_params[0][0]}, over 10 in {sum(p > 10 for p, _ in by_params)} functions; most:",
          ", ".join(f"{w} ({p})" for p, w in by_params[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Python files parsed once per test process: the static checks (cited paths, function length,
private imports, backend members, kind branches) each walk every module of the package, and
parsing it is most of their time."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """The syntax tree of a Python file, shared by every caller in this process (read it, never
    change it); parsed again when the file's size or modification time changed."""
    stat = Path(path).stat()
    return _parsed(Path(path), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))

"""Provenance: what software and hardware a number came from."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version

import tpubench

_VERSIONED = ("torch", "transformers", "jax", "jaxlib", "numpy")


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def git_revision(cwd: str | None = None) -> str | None:
    """The checkout's commit (with '-dirty' when it has local changes), or None outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=cwd)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=cwd)
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def host_environment() -> dict:
    from tpubench.backends.torch import cpu_model_name

    env = {
        "tpubench": tpubench.__version__,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": cpu_model_name(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        "git_revision": git_revision(),
    }
    for name in _VERSIONED:
        env.setdefault(name, package_version(name))
    return env


def environment_key(backend: str, device: str, env: dict) -> str:
    """What must match for an earlier result to stand in for a new one (used by --resume)."""
    keep = {k: env.get(k) for k in ("accelerator_name", "chips", "torch", "transformers", "jax", "jaxlib")}
    blob = json.dumps({"backend": backend, "device": device, **keep}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

"""The KV cache's (and, where a submission's own code says more than its measurements JSON, the
weights') dtype of an MLPerf Inference result, read from the submitter's configs and code in the
results repository. A dtype is taken only where the submission states one value for it; several
values, or none, leave the cell empty.

Where it is stated, per submission style:
- NVIDIA's harness, v5.0 and later (`<division>/<submitter>/configs/<system>/<scenario>/<benchmark>.py`,
  the folder matching the result's system as `mlperf.speculative` matches it): the TensorRT-LLM
  checkpoint flag `'kv_cache_dtype': 'fp8'`. Every setting of one file (accuracy targets, MaxP/MaxQ)
  must say the same.
- NVIDIA's harness of v4.1 (class-based configs, one file per benchmark for every system): the
  quantisation command of the submitter's `code/<model>/tensorrt/README.md` or `builder.py`
  (`quantize.py ... --qformat fp8 --kv_cache_dtype fp8`) gives the KV cache; and where that
  builder refuses anything but the fp8 checkpoint ("Only fp8 supported"), the weights are fp8,
  although the measurements JSON of every such v4.1 result says `fp16` (the dtype the weights were
  quantised from), and where the submitter's `documentation/calibration.md` says the model's "Linear
  ... layer inputs and weights" are quantised, the activations are fp8 too. A preview built from
  private code (the system JSON's `sw_notes`: v4.1's B200) takes none of this.
- Other harnesses (AMD's and its partners' vLLM `harness_llm`, Red Hat's, ...): the configs and
  scripts of `code/<benchmark>/` (`*.yaml`, `*.yml`, `*.sh`, `README*.md`; vendored copies of vLLM
  and tools are not the submission's statement), `kv_cache_dtype: fp8` or `--kv-cache-dtype fp8`.
"""

from __future__ import annotations

import functools
import re

from git_mirror import Mirror

# `kv_cache_dtype: fp8`, `'kv_cache_dtype': 'fp8'`, `kv_cache_dtype=fp8` (a setting), or
# `--kv-cache-dtype fp8`, `--kv_cache_dtype=fp8` (a command line); not a comparison
# (`kv_cache_dtype == "fp8"`), nor an attribute (`self.kv_cache_dtype in ...`).
_KV = re.compile(r"""(?:(?<![\w.-])['"]?kv_cache_dtype['"]?\s*(?::|=(?!=))|--kv[_-]cache[_-]dtype[\s=])\s*['"]?([A-Za-z]\w*)""")
_QFORMAT = re.compile(r"""-{1,2}qformat[\s=]+['"]?([A-Za-z][\w]*)""")
_FLAG_LISTS = re.compile(r"\[[^\[\]]*\]")
_CONFIG_FILES = re.compile(r"(\.ya?ml|\.sh|/README[^/]*\.md)$", re.IGNORECASE)
_VENDORED = re.compile(r"/(setup|tools|third_party|3rdparty|vllm|patches)/", re.IGNORECASE)
_NOT_A_DTYPE = {"auto", "none", "null", "default", "str", "optional"}   # "str": a type annotation


def stated_dtypes(mirror: Mirror, result_dir: str, framework: str | None, sw_notes: str = "") -> dict[str, str]:
    """{'kv_cache_dtype': ..., 'weight_dtype': ..., 'activation_dtype': ...} as far as the submission
    states them (keys absent where it does not); `sw_notes`: the system JSON's."""
    division, submitter, _, system, bench, scenario = result_dir.split("/")[:6]
    root = f"{division}/{submitter}"
    config = harness_config(mirror, root, system, scenario, bench)
    if config is not None:
        kv = _one(_KV.findall(mirror.text(config)))
        return {"kv_cache_dtype": kv} if kv else {}
    if str(framework or "").lower().startswith("tensorrt"):
        # A preview built from "private git hash for code" (v4.1's B200) did not run the code here.
        return {} if "private" in str(sw_notes).lower() else tensorrt_v41(mirror, root, bench)
    kv = _one(v for path in code_configs(mirror, root, bench) for v in _KV.findall(mirror.text(path)))
    return {"kv_cache_dtype": kv} if kv else {}


def bench_base(bench: str) -> str:
    """'llama2-70b-99.9' -> 'llama2-70b'; 'llama3.1-8b' -> 'llama3.1-8b'."""
    return re.sub(r"-99(\.9)?$", "", bench)


def harness_config(mirror: Mirror, root: str, system: str, scenario: str, bench: str) -> str | None:
    """NVIDIA's harness config of this result (v5.0 and later), or None."""
    name = bench_base(bench).replace("llama3.1-", "llama3_1-") + ".py"
    for path in _folder(mirror, f"{root}/configs"):
        parts = path.split("/")
        if len(parts) != 6 or parts[-1] != name:
            continue
        folder, scen = parts[-3:-1]
        if scen.lower() == scenario.lower() and (system == folder or system.startswith(folder + "_")):
            return path
    return None


def tensorrt_v41(mirror: Mirror, root: str, bench: str) -> dict[str, str]:
    """NVIDIA's v4.1 TensorRT-LLM code: the quantisation command's formats, and fp8 weights where
    the builder accepts only the fp8 checkpoint."""
    folder = f"{root}/code/{bench_base(bench)}/tensorrt"
    texts = [mirror.text(p) for p in (f"{folder}/README.md", f"{folder}/builder.py") if p in mirror.files]
    # A command is a README line, or a builder's list of flags, that sets --qformat.
    commands = [c for text in texts for c in [*text.splitlines(), *_FLAG_LISTS.findall(text)] if _QFORMAT.search(c)]
    out = {}
    kv = _one(v for line in commands for v in _KV.findall(line))
    if kv:
        out["kv_cache_dtype"] = kv
    builder = texts[-1] if texts and f"{folder}/builder.py" in mirror.files else ""
    if "Only fp8 supported" in builder and _one(v for line in commands for v in _QFORMAT.findall(line)) == "fp8":
        out["weight_dtype"] = "fp8"
        if _quantized_inputs(mirror.text_if_present(f"{root}/documentation/calibration.md") or "", bench):
            out["activation_dtype"] = "fp8"
    return out


def _quantized_inputs(calibration: str, bench: str) -> bool:
    """Whether the submitter's documentation/calibration.md says this model's linear layers'
    inputs, not only their weights, are quantised ("Linear ... layer inputs and weights")."""
    name = {"llama2-70b": "Llama2-70B", "mixtral-8x7b": "Mixtral-8x7B"}.get(bench_base(bench))
    if name is None:
        return False
    section = re.search(rf"When quantizing (?:the )?{re.escape(name)}.*?(?=When quantizing|\Z)", calibration, re.S)
    return bool(section and re.search(r"linear[^\n]*inputs and weights", section[0], re.I))


def code_configs(mirror: Mirror, root: str, bench: str) -> list[str]:
    """The submitter's own config files and scripts for this benchmark (not vendored code)."""
    prefixes = {f"{root}/code/{bench}/", f"{root}/code/{bench_base(bench)}/"}
    return [p for p in _folder(mirror, f"{root}/code") if any(p.startswith(x) for x in prefixes)
            and _CONFIG_FILES.search(p) and not _VENDORED.search(p[len(root):])]


@functools.lru_cache(maxsize=4)
def _folders(mirror: Mirror) -> dict[str, list[str]]:
    """The mirror's files by their first three path components ('closed/NVIDIA/configs'): each
    row looks in two such folders, and a results tree holds 100,000 files."""
    out: dict[str, list[str]] = {}
    for path in mirror.files:
        out.setdefault("/".join(path.split("/")[:3]), []).append(path)
    return out


def _folder(mirror: Mirror, prefix: str) -> list[str]:
    return _folders(mirror).get(prefix, [])


def _one(values) -> str | None:
    """The one dtype stated (lower case), or None when none or several are."""
    found = {v.lower() for v in values} - _NOT_A_DTYPE
    return found.pop() if len(found) == 1 else None


__all__ = ["bench_base", "code_configs", "harness_config", "stated_dtypes", "tensorrt_v41"]

"""The records of an MLPerf Inference round whose results repository holds no
`summary_results.json` (v4.1 and earlier), built from the submission tree itself in the form
`mlperf.version_rows` reads (the keys of a summary_results.json record).

Per result `<division>/<submitter>/results/<system>/<benchmark>/<scenario>/performance/run_1/`:
- the system JSON `<division>/<submitter>/systems/<system>.json`: `submitter`, `system_type`
  (the suite: datacenter, edge, or both), `number_of_nodes`, `accelerators_per_node`,
  `accelerator_model_name`;
- the LoadGen detail log `mlperf_log_detail.txt` beside the summary: the token rate
  (`result_tokens_per_second` Offline, `result_completed_tokens_per_second` Server) that
  `mlperf.result_row` cross-checks against the summary log, as it checks a round's summary table;
- the accuracy run's `accuracy/accuracy.txt`: `'tokens_per_sample'`.
Scenario folders are matched without case (Neural Magic's are lower case); SingleStream and
MultiStream results, which no LLM of these rounds has in the datacenter suite, are not records.
There is no MLCommons result ID in the tree, so `ID` is empty.
"""

from __future__ import annotations

import json
import posixpath
import re

from git_mirror import Mirror

from tpubench.output.published.mlperf import _NOT_LLM

SCENARIOS = {"offline": "Offline", "server": "Server", "interactive": "Interactive"}
_SUMMARY = re.compile(r"^([^/]+)/([^/]+)/results/([^/]+)/([^/]+)/([^/]+)/performance/run_1/mlperf_log_summary\.txt$")
_DETAIL = re.compile(r'"key": "(result_[a-z_]+)", "value": ([0-9.eE+-]+)')
_TOKENS_PER_SAMPLE = re.compile(r"'tokens_per_sample': ([0-9.]+)")


def tree_records(mirror: Mirror, division: str = "closed") -> list[dict]:
    """One record per result of `division` in the tree, sorted by path."""
    systems: dict[str, dict] = {}
    out = []
    for path in sorted(mirror.files):
        m = _SUMMARY.match(path)
        if not m or m[1] != division or m[5].lower() not in SCENARIOS:
            continue
        _, submitter, system, bench, scenario = m.groups()
        key = f"{division}/{submitter}/systems/{system}.json"
        if key not in systems:
            systems[key] = json.loads(mirror.text(key)) if key in mirror.files else {}
        out.append(record(mirror, systems[key], path, submitter, bench, SCENARIOS[scenario.lower()]))
    return out


def record(mirror: Mirror, sysdesc: dict, log_path: str, submitter: str, bench: str, scenario: str) -> dict:
    """A summary_results.json-like record of one result (LLM figures read only for LLMs)."""
    location = posixpath.dirname(log_path)
    suite = str(sysdesc.get("system_type") or "")
    rec = {
        "ID": "", "Category": log_path.split("/")[0], "Suite": "datacenter" if "datacenter" in suite else suite,
        "Submitter": sysdesc.get("submitter") or submitter, "Model": bench, "Scenario": scenario,
        "Nodes": _int(sysdesc.get("number_of_nodes"), 1), "a#": _int(sysdesc.get("accelerators_per_node"), 0),
        "Accelerator": str(sysdesc.get("accelerator_model_name") or ""), "Location": location,
        "Accuracy": "", "Performance_Result": None,
    }
    if _NOT_LLM.match(bench):
        return rec
    detail = dict(_DETAIL.findall(mirror.text_if_present(f"{location}/mlperf_log_detail.txt") or ""))
    rate = detail.get("result_tokens_per_second" if scenario == "Offline" else "result_completed_tokens_per_second")
    rec["Performance_Result"] = float(rate) if rate else None
    accuracy = mirror.text_if_present(posixpath.normpath(f"{location}/../../accuracy/accuracy.txt")) or ""
    tokens = _TOKENS_PER_SAMPLE.search(accuracy)
    rec["Accuracy"] = f"TOKENS_PER_SAMPLE: {tokens[1]}" if tokens else ""
    return rec


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


__all__ = ["SCENARIOS", "record", "tree_records"]

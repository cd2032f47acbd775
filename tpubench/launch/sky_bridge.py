"""Runs under the Python that has SkyPilot (this environment's, or SkyPilot's own venv): one request
as JSON on stdin, SkyPilot's own output passed through, and one result line on stdout.

It imports only SkyPilot and the standard library, so SkyPilot can live in its own environment:
SkyPilot pins click<8.2 while transformers 5's huggingface_hub needs click>=8.4.2.
Every SkyPilot error (no credentials, no capacity, a bad task) becomes {"error": one line}.
"""

import io
import json
import sys

MARK = "TPUBENCH-BRIDGE-RESULT "


def _status(value) -> str:
    return str(getattr(value, "value", value) or "")


def _record(r) -> dict:
    get = r.get if isinstance(r, dict) else (lambda k, d=None: getattr(r, k, d))
    return {"job_id": get("job_id"), "job_name": get("job_name"), "status": _status(get("status")),
            "failure_reason": get("failure_reason") or ""}


def _resources(task) -> list:
    out = []
    for r in task.resources:
        out.append({"accelerators": dict(r.accelerators or {}), "cloud": str(r.cloud) if r.cloud else None,
                    "region": r.region, "instance_type": r.instance_type, "use_spot": bool(r.use_spot)})
    return out


def _catalog(filename: str, fetch: bool) -> dict:
    """SkyPilot's own copy of one catalog file ("gcp/vms.csv"): with `fetch`, first refreshed from
    the hosted catalog as SkyPilot refreshes it (read_catalog with a pull frequency of 0 hours);
    what SkyPilot logged while doing so (a failed fetch leaves the cached copy) comes back too."""
    import logging

    from sky.catalog import common
    from sky.skylet import constants

    warnings: list = []

    class _Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    keep = _Keep(logging.WARNING)
    log = logging.getLogger(common.__name__)
    log.addHandler(keep)
    try:
        frame = common.read_catalog(filename, pull_frequency_hours=0 if fetch else None)
        frame.columns    # SkyPilot reads (and, when due, downloads) a catalog on first use
    finally:
        log.removeHandler(keep)
    return {"file": filename, "path": common.get_catalog_path(filename), "schema": constants.CATALOG_SCHEMA_VERSION,
            "modified_locally": bool(common.is_catalog_modified(filename)), "warnings": warnings}


def handle(request: dict) -> dict:
    import sky

    op = request["op"]
    if op == "version":
        return {"version": sky.__version__}
    if op == "catalog":
        return {"version": sky.__version__,
                "files": [_catalog(name, bool(request.get("fetch", True))) for name in request["files"]]}
    if op == "parse":
        tasks = []
        for path in request["files"]:
            t = sky.Task.from_yaml(path)
            tasks.append({"file": path, "name": t.name, "num_nodes": t.num_nodes, "resources": _resources(t),
                          "setup": t.setup, "run": t.run, "envs": dict(t.envs), "workdir": t.workdir,
                          "file_mounts": dict(t.file_mounts or {}),
                          "storage_mounts": {k: v.source for k, v in (t.storage_mounts or {}).items()}})
        return {"tasks": tasks}
    if op == "launch":
        task = sky.Task.from_yaml(request["file"])
        job_ids, _ = sky.stream_and_get(sky.jobs.launch(task, name=request["name"]))
        return {"job_ids": list(job_ids or [])}
    if op == "queue":
        records = sky.get(sky.jobs.queue(refresh=False, job_ids=request.get("job_ids") or None))
        return {"jobs": [_record(r) for r in records]}
    if op == "logs":
        buf = io.StringIO()
        sky.jobs.tail_logs(job_id=request["job_id"], follow=False, tail=request.get("tail", 50), output_stream=buf)
        return {"text": buf.getvalue()}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        result = handle(request)
    except BaseException as exc:  # noqa: BLE001 - every SkyPilot failure is reported, never raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = " ".join(str(exc).split()) or type(exc).__name__
        result = {"error": f"{type(exc).__name__}: {text[:500]}"}
    sys.stdout.write("\n" + MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

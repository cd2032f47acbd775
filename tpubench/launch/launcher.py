"""`tpubench launch` and `tpubench collect`, end to end: resolve and price the targets, plan each one,
write its task file and the launch manifest, launch managed jobs, and later bring the results home.
The CLI only parses and renders; everything here is callable from a notebook or a test.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from tpubench.version import __version__
from tpubench.errors import ExternalFailure, UserError
from tpubench.launch import skypilot
from tpubench.launch.plan import DEFAULT_SETUP_S, TargetPlan, plan_target
from tpubench.launch.targets import Target, resolve_targets
from tpubench.launch.tasks import (Bucket, build_task, job_name, new_launch_id, parse_bucket, read_manifests,
                                   remote_workload, source_checkout, task_header, write_manifest, write_task)
from tpubench.records.result import now_iso, replace_file
from tpubench.run.sweep import check_sweep_size, scale_names
from tpubench.run.workload import load_workload
from tpubench.run.overrides import with_layout

FAILED_STATES = ("FAILED", "FAILED_SETUP", "FAILED_PRECHECKS", "FAILED_NO_RESOURCE", "FAILED_CONTROLLER")


@dataclass
class LaunchOptions:
    targets: list[str]
    bucket: str | None
    cloud: str | None = None
    region: str | None = None
    spot: bool = False
    scale: str | None = None
    tensor_parallel: int | None = None
    expert_parallel: int | None = None
    data_parallel: int | None = None
    fsdp: bool | None = None
    install: str | None = None          # pip spec installed on the target instead of this checkout
    hours: float | None = None          # expected hours per target, instead of the estimate
    setup_s: float = DEFAULT_SETUP_S
    prices: list[Path] = field(default_factory=list)
    history_dir: Path | None = Path("results")


@dataclass
class Prepared:
    launch_id: str
    folder: Path
    bucket: Bucket
    plans: list[TargetPlan]
    task_files: list[Path]
    manifest: dict

    @property
    def total_usd(self) -> float:
        return sum(p.usd for p in self.plans if p.usd is not None)

    @property
    def unpriced(self) -> list[TargetPlan]:
        return [p for p in self.plans if p.usd is None]


def prepare(workload_path: Path, options: LaunchOptions, tasks_dir: Path, *, dry_run: bool = False) -> Prepared:
    """Everything short of launching: targets priced, plans, task files and the manifest written
    (`dry_run` is recorded: `collect` then looks for results of tasks launched by hand)."""
    from tpubench.money.pricing import load_prices

    source = str(workload_path)
    workload = load_workload(workload_path)
    for name in scale_names(workload):
        check_sweep_size(workload, name, source=source)
    workload = with_layout(workload, options.tensor_parallel, options.expert_parallel, options.data_parallel,
                           options.fsdp)
    bucket = parse_bucket(options.bucket)
    prices = load_prices(options.prices)
    plan_name = "spot" if options.spot else "on_demand"
    targets = resolve_targets(options.targets, prices, plan=plan_name, cloud=options.cloud, region=options.region)
    launch_id = new_launch_id(workload.name)
    folder = tasks_dir / launch_id
    layout_args = _layout_args(options)
    history = _history(options.history_dir, workload.name)
    checkout = None if options.install else source_checkout()
    # Every target is planned (and may be refused) before anything is written.
    plans, tasks = [], []
    for target in targets:
        plan = plan_target(workload, source, target, remote_workload=remote_workload(workload.name),
                           scale=options.scale, out_dir=bucket.mounted(launch_id, target.slug), run_args=layout_args,
                           setup_s=options.setup_s, hours=options.hours, history_s=history.get(target.accelerator))
        plans.append(plan)
        tasks.append(build_task(plan, workload_name=workload.name, workload_path=workload_path, bucket=bucket,
                                launch_id=launch_id, spot=options.spot, install=options.install, checkout=checkout))
    files, entries = [], []
    for plan, task in zip(plans, tasks):
        target = plan.target
        job = job_name(workload.name, target)
        path = folder / f"{target.slug}.yaml"
        files.append(write_task(task, task_header(plan, job, path), path))
        entries.append({"target": target.spec, "slug": target.slug, "task_file": str(path), "job_name": job,
                        "job_id": None, "results_url": bucket.url(launch_id, target.slug),
                        "device": target.device, "accelerator": target.accelerator, "num_nodes": plan.num_nodes,
                        "points": len(plan.points), "priced_as": target.priced_as, "expected_hours": plan.hours,
                        "expected_usd": plan.usd})
    manifest = {"launch_id": launch_id, "created_at": now_iso(), "tpubench_version": __version__,
                "workload": workload.name, "workload_file": str(workload_path.resolve()), "bucket": bucket.url(),
                "spot": options.spot, "dry_run": dry_run, "targets": entries}
    write_manifest(folder, manifest)
    return Prepared(launch_id, folder, bucket, plans, files, manifest)


def _layout_args(options: LaunchOptions) -> list[str]:
    args = []
    for flag, value in (("--tensor-parallel", options.tensor_parallel), ("--expert-parallel", options.expert_parallel),
                        ("--data-parallel", options.data_parallel)):
        if value is not None:
            args += [flag, str(value)]
    if options.fsdp is not None:
        args.append("--fsdp" if options.fsdp else "--no-fsdp")
    return args


def _history(results_dir: Path | None, workload_name: str) -> dict[str, dict[str, float]]:
    """accelerator -> point key -> median seconds a finished point of this workload took there."""
    from tpubench.hardware.accelerators import normalize_accelerator
    from tpubench.records.result import read_results

    if results_dir is None or not Path(results_dir).is_dir():
        return {}
    seconds: dict[str, dict[str, list[float]]] = {}
    for _, r in read_results(results_dir, warn=lambda _msg: None):
        if r.status != "ok" or r.point.get("workload") != workload_name:
            continue
        try:
            wall = (datetime.fromisoformat(r.finished_at) - datetime.fromisoformat(r.started_at)).total_seconds()
        except (TypeError, ValueError):
            continue
        accelerator = normalize_accelerator(r.environment.get("accelerator_name"), r.device)
        if accelerator and wall > 0:
            seconds.setdefault(accelerator, {}).setdefault(r.point_key, []).append(wall)
    return {acc: {k: statistics.median(v) for k, v in by_key.items()} for acc, by_key in seconds.items()}


def needs_confirmation(prepared: Prepared, max_cost_usd: float) -> str | None:
    """Why launching needs --yes (the estimate is over the limit, or cannot be made), or None."""
    if prepared.unpriced:
        names = ", ".join(p.target.spec for p in prepared.unpriced)
        return f"no price for {names}, so the cost cannot be bounded"
    if prepared.total_usd > max_cost_usd:
        return f"the estimate ${prepared.total_usd:,.2f} is over the ${max_cost_usd:,.2f} limit (--max-cost)"
    return None


def launch_jobs(prepared: Prepared, *, on_line: Callable[[Target, str], None] | None = None,
                on_launched: Callable[[Target, int | None], None] | None = None) -> list[dict]:
    """Launch every task as a SkyPilot managed job (spot jobs are recovered by SkyPilot, and the
    run's --resume skips what the bucket already holds). The manifest records each job id as soon
    as it is known; a target SkyPilot refuses is recorded with its error and the others go on."""
    python = skypilot.require_python()
    for plan, entry in zip(prepared.plans, prepared.manifest["targets"]):
        target = plan.target
        try:
            answer = skypilot.call({"op": "launch", "file": entry["task_file"], "name": entry["job_name"]},
                                   python=python, what=f"launching {target.spec}",
                                   on_line=(lambda line, t=target: on_line(t, line)) if on_line else None)
            ids = answer.get("job_ids") or []
            entry["job_id"] = ids[0] if ids else None
        except ExternalFailure as exc:
            entry["launch_error"] = exc.one_line()
        write_manifest(prepared.folder, prepared.manifest)
        if on_launched:
            on_launched(target, entry.get("job_id"))
    return prepared.manifest["targets"]


# ----------------------------------------------------------------------------- collect


@dataclass
class JobReport:
    launch_id: str
    target: str
    job_id: int | None
    status: str
    results_url: str
    found: int = 0
    added: int = 0
    log_file: Path | None = None
    log_tail: list[str] = field(default_factory=list)
    fetch_error: str = ""

    @property
    def fetch_failed_badly(self) -> bool:
        """A job that ran to the end (or whose state is unknown) should have results to fetch; a
        failed or unfinished one may have written nothing yet."""
        return bool(self.fetch_error) and self.status in ("SUCCEEDED", "UNKNOWN")


def collect_launches(tasks_dir: Path, out_dir: Path, *, launch_id: str | None = None,
                     warn: Callable[[str], None] | None = None) -> list[JobReport]:
    """Per launched target: its job's state (and log tail when it failed), then its results merged."""
    from tpubench.launch.collect import fetch, local_index, merge_results

    manifests = read_manifests(tasks_dir)
    if launch_id:
        manifests = [m for m in manifests if m.get("launch_id") == launch_id]
        if not manifests:
            raise UserError(f"no launch '{launch_id}' under {tasks_dir}", field="--launch-id")
    if not manifests:
        raise UserError(f"no launches under {tasks_dir} (run `tpubench launch` first, or name result folders "
                        "or bucket URLs: tpubench collect gs://BUCKET/... FOLDER)")
    states = _job_states(manifests, warn)
    local = local_index(out_dir, warn=warn)   # read once, kept current by each merge
    reports = []
    for manifest in manifests:
        folder = Path(manifest["_folder"])
        for entry in manifest["targets"]:
            job_id = entry.get("job_id")
            state = states.get(job_id, {}) if job_id is not None else {}
            if job_id is not None:
                status = state.get("status") or "UNKNOWN"
            else:
                status = "DRY RUN" if manifest.get("dry_run") and not entry.get("launch_error") else "NOT LAUNCHED"
            report = JobReport(manifest["launch_id"], entry["target"], job_id, status, entry["results_url"])
            if status in FAILED_STATES:
                report.log_file, report.log_tail = _keep_log_tail(job_id, folder / f"{entry['slug']}.log",
                                                                  state.get("failure_reason", ""), warn)
            if status != "NOT LAUNCHED":   # a dry run's tasks may have been launched by hand
                try:
                    fetched = fetch(entry["results_url"], folder / "fetched" / entry["slug"])
                except UserError as exc:   # one bucket out of reach does not stop the others
                    report.fetch_error = exc.one_line()
                else:
                    summary = merge_results([fetched], out_dir, local=local, warn=warn)
                    report.found, report.added = summary.found, len(summary.added)
            reports.append(report)
    return reports


def _job_states(manifests: list[dict], warn) -> dict[int, dict]:
    ids = [e["job_id"] for m in manifests for e in m["targets"] if e.get("job_id") is not None]
    if not ids:
        return {}
    try:
        answer = skypilot.call({"op": "queue", "job_ids": ids}, what="reading the managed jobs' states")
    except UserError as exc:   # not installed, no API server, the controller gone: fetch all the same
        if warn:
            warn(f"job states not checked: {exc.one_line()}")
        return {}
    return {j["job_id"]: j for j in answer.get("jobs", [])}


def _keep_log_tail(job_id: int, path: Path, reason: str, warn) -> tuple[Path, list[str]]:
    """A failed job's last log lines, kept beside its task file (they vanish with the job's machine)."""
    try:
        text = skypilot.call({"op": "logs", "job_id": job_id, "tail": 100}, what=f"reading job {job_id}'s log")["text"]
    except ExternalFailure as exc:
        if warn:
            warn(exc.one_line())
        text = ""
    if reason:
        text = f"failure reason: {reason}\n{text}"
    replace_file(path, text.encode())
    return path, [line for line in text.splitlines() if line.strip()][-8:]

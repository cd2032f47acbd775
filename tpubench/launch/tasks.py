"""SkyPilot task files, one per target, and the launch manifest `collect` reads back.

A task installs tpubench with the target's extra, mounts the workload file and a results bucket,
and runs `tpubench run ... --resume --out <bucket mount>`: results land in the bucket as each point
finishes, so a preempted spot job that SkyPilot recovers skips what was already measured, and
nothing is lost when the job's machine is deleted.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from tpubench.version import __version__
from tpubench.errors import UserError
from tpubench.scenarios.registry import scenario_of
from tpubench.launch.plan import RESULTS_MOUNT, WORKLOAD_DIR, TargetPlan
from tpubench.launch.targets import Target
from tpubench.records.result import replace_file

# `tpubench[extra]` per device; TorchNeuron comes from AWS's own package index.
EXTRAS = {"tpu": "tpu", "cuda": "cuda", "neuron": "neuron", "cpu": None}
NEURON_INDEX = "https://pip.repos.neuron.amazonaws.com"
_BUCKET = re.compile(r"^(?P<scheme>gs|s3)://(?P<name>[a-z0-9][a-z0-9._-]{1,221}[a-z0-9])(?P<prefix>(/[A-Za-z0-9._-]+)*)/?$")
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Bucket:
    scheme: str
    name: str
    prefix: str      # '' or 'a/b'

    @property
    def root(self) -> str:
        return f"{self.scheme}://{self.name}"

    def url(self, *parts: str) -> str:
        return "/".join([self.root, *([self.prefix] if self.prefix else []), *parts])

    def mounted(self, *parts: str) -> str:
        return "/".join([RESULTS_MOUNT, *([self.prefix] if self.prefix else []), *parts])


def parse_bucket(text: str | None) -> Bucket:
    if not text:
        raise UserError("name the bucket results go to: --bucket gs://NAME or s3://NAME (or set TPUBENCH_BUCKET); "
                        "a managed job's machine is deleted when the job ends", field="--bucket")
    m = _BUCKET.match(text.strip())
    if not m:
        raise UserError(f"'{text}' is not a bucket URL: gs://NAME[/PREFIX] or s3://NAME[/PREFIX] "
                        "(lowercase bucket name; letters, digits, '.', '_', '-' in the prefix)", field="--bucket")
    return Bucket(m.group("scheme"), m.group("name"), m.group("prefix").strip("/"))


def remote_workload(workload_name: str, home: str = "$HOME") -> str:
    """Where the workload file lies on the target (`~` in file_mounts, `$HOME` in commands)."""
    return f"{home}/{WORKLOAD_DIR}/{workload_name}.yaml"


def new_launch_id(workload_name: str) -> str:
    """Time-ordered and unique: two launches in one second get their own folders and bucket paths."""
    return f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}-{workload_name}"


def job_name(workload_name: str, target: Target) -> str:
    """A managed-job name SkyPilot accepts everywhere (lowercase letters, digits, dashes)."""
    return re.sub(r"[^a-z0-9-]+", "-", f"tpubench-{workload_name}-{target.slug}".lower()).strip("-")[:63]


def source_checkout() -> Path | None:
    """The tpubench checkout this code runs from (installed with `pip install -e`), if any."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "tpubench" / "cli.py").is_file() else None


_VERSION_SPEC = re.compile(r"^(==|>=|<=|~=|!=|<|>)")


def package_spec(extras: list[str], install: str | None, checkout: Path | None) -> str:
    """What pip installs on the target: this checkout (uploaded as the workdir), or tpubench from
    `--install` (a version such as `==0.1.0`, or a URL such as `git+https://...`), else this version."""
    suffix = f"[{','.join(extras)}]" if extras else ""
    if install is None:
        return f"-e {shlex.quote('.' + suffix)}" if checkout is not None else shlex.quote(f"tpubench{suffix}=={__version__}")
    install = install.strip()
    if _VERSION_SPEC.match(install):
        return shlex.quote(f"tpubench{suffix}{install}")
    if "://" in install:
        return shlex.quote(f"tpubench{suffix} @ {install}")
    raise UserError(f"'{install}' is not a tpubench version (==0.1.0) or a URL (git+https://...): the target's "
                    "extras are added to it", field="--install")


def install_lines(target: Target, install: str | None, checkout: Path | None,
                  scenario_extras: tuple[str, ...] = ()) -> list[str]:
    """The setup section: a venv with tpubench, the device's extra and the extras the workload's
    scenario needs (serve: the streaming client and `transformers serve`)."""
    extras = [e for e in (EXTRAS[target.device], *scenario_extras) if e]
    index = [f"--extra-index-url {NEURON_INDEX}"] if target.device == "neuron" else []
    return ["set -euo pipefail",
            "python3 -m venv ~/tpubench-venv",
            ". ~/tpubench-venv/bin/activate",
            "python -m pip install -q --upgrade pip",
            " ".join(["python -m pip install -q", package_spec(extras, install, checkout), *index]),
            "tpubench backends   # what this machine offers, in the setup log"]


def build_task(plan: TargetPlan, *, workload_name: str, workload_path: Path, bucket: Bucket, launch_id: str,
               spot: bool, install: str | None = None, checkout: Path | None = None) -> dict:
    """The SkyPilot task (YAML mapping) for one target."""
    t = plan.target
    resources: dict = {}
    if t.accelerators:
        resources["accelerators"] = t.accelerators
    else:
        resources["instance_type"] = t.instance_type or t.priced_as["instance_type"]
    if t.cloud:
        resources["infra"] = "/".join(x for x in (t.cloud, t.region) if x)
    resources["use_spot"] = bool(spot)
    task: dict = {"name": job_name(workload_name, t), "resources": resources, "num_nodes": plan.num_nodes}
    if checkout is not None and install is None:
        task["workdir"] = str(checkout)
    task["envs"] = {"TPUBENCH_LAUNCH_ID": launch_id, "TPUBENCH_TARGET": t.spec}
    task["file_mounts"] = {
        remote_workload(workload_name, "~"): str(workload_path.resolve()),
        RESULTS_MOUNT: {"source": bucket.root, "mode": "MOUNT"},
    }
    extras = tuple(dict.fromkeys(e for p in plan.points for e in scenario_of(p.scenario_kind).launch_extras))
    task["setup"] = "\n".join(install_lines(t, install, checkout, extras)) + "\n"
    task["run"] = "\n".join(["set -uo pipefail", ". ~/tpubench-venv/bin/activate",
                             f"mkdir -p {bucket.mounted(launch_id, t.slug)}", *plan.run_lines]) + "\n"
    return task


def task_header(plan: TargetPlan, job: str, path: Path) -> str:
    t, price = plan.target, plan.target.priced_as
    hourly = f"${price['usd_per_hour']:,.2f}/h" if price["usd_per_hour"] is not None else "no price"
    cost = f"${plan.usd:,.2f}" if plan.usd is not None else "unknown"
    lines = [f"Written by `tpubench launch` (tpubench {__version__}) for target {t.spec}.",
             f"Launch: sky jobs launch {path} --name {job} --yes",
             f"Priced as {price['cloud']} {price['region']} {price['instance_type']} ({price['plan']}, {hourly}, "
             f"as of {price['as_of']}) x {plan.num_nodes} node(s); expected {plan.hours:.2f} h -> {cost}.",
             "SkyPilot's optimizer may pick another instance with the same accelerators where no cloud is pinned."]
    return "".join(f"# {line}\n" for line in lines)


class _TaskDumper(yaml.SafeDumper):
    """Multi-line strings (setup, run) as literal blocks, as people write SkyPilot tasks."""


_TaskDumper.add_representer(str, lambda dumper, value: dumper.represent_scalar(
    "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))


def write_task(task: dict, header: str, path: Path) -> Path:
    text = header + yaml.dump(task, Dumper=_TaskDumper, sort_keys=False, default_flow_style=False, width=1000)
    return replace_file(path, text.encode())


def write_manifest(folder: Path, manifest: dict) -> Path:
    """The manifest holds the job ids: rewritten atomically after each launch."""
    return replace_file(folder / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())


_MANIFEST_KEYS = ("launch_id", "targets")
_TARGET_KEYS = ("target", "slug", "job_id", "results_url")


def read_manifests(tasks_dir: Path) -> list[dict]:
    """Every launch's manifest under `tasks_dir`, oldest first; a broken one is a one-line error."""
    out = []
    for path in sorted(tasks_dir.glob(f"*/{MANIFEST}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"not a readable launch manifest: {exc}", where=str(path)) from None
        missing = [k for k in _MANIFEST_KEYS if not isinstance(data, dict) or k not in data]
        missing += [f"targets[{i}].{k}" for i, t in enumerate(data.get("targets") or [] if not missing else [])
                    for k in _TARGET_KEYS if not isinstance(t, dict) or k not in t]
        if missing:
            raise UserError(f"not a tpubench launch manifest: missing {', '.join(missing)}", where=str(path))
        data["_folder"] = str(path.parent)
        out.append(data)
    return out

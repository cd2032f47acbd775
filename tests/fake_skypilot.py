"""A scripted stand-in for SkyPilot's SDK, with its real call shapes (sky.jobs.launch -> request,
sky.stream_and_get -> (job ids, handle), sky.jobs.queue -> records, sky.jobs.tail_logs(output_stream=)),
imported by tpubench's real bridge in a real subprocess (PYTHONPATH). No cloud is touched.

Job ids: 41 + len(job name) % 7; a job named *trn2* finds no capacity. Queue states come from
$FAKE_SKY_STATES ({"job id": "STATE"}), or the controller is down with $FAKE_SKY_CONTROLLER_DOWN; a
FAILED job's log ends with an out-of-memory error.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FILES = {
    "sky/__init__.py": """
        __version__ = "scripted"
        from sky import exceptions, jobs

        class Task:
            @staticmethod
            def from_yaml(path):
                task = Task()
                task.path = path
                return task

        def stream_and_get(request):
            print("Launching managed job", request["name"], "(provisioning)")
            if "trn2" in request["name"]:
                raise exceptions.ResourcesUnavailableError(
                    "Failed to acquire resources in all zones in us-east-2\\nTry other regions.")
            return [41 + len(request["name"]) % 7], None

        def get(request):
            return request
    """,
    "sky/exceptions.py": """
        class ResourcesUnavailableError(Exception):
            pass

        class ClusterNotUpError(Exception):
            pass
    """,
    "sky/jobs.py": """
        import json
        import os

        def launch(task, name=None):
            return {"name": name, "file": task.path}

        def queue(refresh, skip_finished=False, all_users=False, job_ids=None):
            if os.environ.get("FAKE_SKY_CONTROLLER_DOWN"):
                from sky import exceptions
                raise exceptions.ClusterNotUpError("Jobs controller is not up.\\nRun `sky jobs queue --refresh`.")
            states = json.loads(os.environ.get("FAKE_SKY_STATES", "{}"))
            return [{"job_id": i, "job_name": f"job-{i}", "status": states.get(str(i), "RUNNING"),
                     "failure_reason": "exit code 1" if states.get(str(i), "").startswith("FAILED") else None}
                    for i in job_ids]

        def tail_logs(name=None, job_id=None, follow=True, controller=False, refresh=False, tail=None,
                      output_stream=None):
            lines = [f"job {job_id} log line {k}" for k in range(20)] + ["torch.OutOfMemoryError: CUDA out of memory"]
            output_stream.write("\\n".join(lines[-tail:]) + "\\n")
            return 100
    """,
}


def write_fake_sky(folder: Path) -> Path:
    for rel, text in FILES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder

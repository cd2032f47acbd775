"""The one error type the CLI turns into a single line and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, a field, a device or a package.

    `where` names the file (and line, when known) and `field` the dotted path inside it, so the
    message reads like `workloads/x.yaml:12: model.dtype: ...`.
    """

    def __init__(self, message: str, *, where: str | None = None, field: str | None = None):
        self.message = message
        self.where = where
        self.field = field
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [p for p in (self.where, self.field) if p]
        prefix = ": ".join(parts)
        text = " ".join(self.message.split())
        return f"{prefix}: {text}" if prefix else text


class ExternalFailure(UserError):
    """A cloud or tool outside tpubench refused or failed (SkyPilot without credentials, no capacity,
    a bucket that cannot be read): one line like bad input, but exit code 1."""

    exit_code = 1


class Unavailable(Exception):
    """A point this device or installation cannot run, by design rather than by failure: a kernel
    with no build for the device, a package the arm needs is not installed. The runner records it as
    a `skipped` result with this one-line reason; nothing falls back silently to another arm."""

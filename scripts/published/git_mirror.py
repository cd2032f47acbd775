"""Read files of a public repository from a local git copy (a bare clone or a mirror such as
`git clone --mirror`), at a pinned commit, without a work tree: `git show COMMIT:PATH`.

The regeneration script never reaches the network: the maintainer fetches the repositories with
git first; every row it writes names the repository, path and commit it was read from, and the
commit's date.
"""

from __future__ import annotations

import fnmatch
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


class MirrorMissing(RuntimeError):
    """A repository (or a commit in it) that the regeneration needs is not in the mirrors folder, or
    its git copy cannot be read."""


# Seconds any one git call may take. The slowest here (`log --name-only` over a results
# repository's whole history) takes a few seconds; a call that has not finished in this long is
# stuck, not slow: a git directory whose objects/info/alternates is a FIFO blocks git's open() of it
# forever, and a copy on a hung network mount does the same.
GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Mirror:
    repo: str                 # owner/name as GitHub spells it, e.g. mlcommons/inference_results_v5.1
    git_dir: Path
    commit: str               # the full commit every file is read at
    timeout_s: float | None = None   # seconds per git call; None: GIT_TIMEOUT_S

    def _git(self, *args: str, binary: bool = False):
        timeout = GIT_TIMEOUT_S if self.timeout_s is None else self.timeout_s
        try:
            out = subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True, check=False,
                                 stdin=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise MirrorMissing(f"{self.repo}: git {args[0]} did not finish in {timeout:g} s; is {self.git_dir} "
                                "a readable git directory (a FIFO or a hung mount in it blocks git)?") from None
        if out.returncode != 0:
            first = (out.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[0]
            raise MirrorMissing(f"{self.repo}: git {' '.join(args)}: {first}")
        return out.stdout if binary else out.stdout.decode("utf-8", errors="replace")

    @cached_property
    def files(self) -> list[str]:
        """Every file path in the tree at `commit`."""
        return self._git("ls-tree", "-r", "--name-only", "-z", self.commit).split("\0")[:-1]

    def glob(self, pattern: str) -> list[str]:
        """Paths matching a shell pattern (fnmatch: `*` also crosses `/`), sorted."""
        return sorted(p for p in self.files if fnmatch.fnmatchcase(p, pattern))

    def text(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")

    def text_if_present(self, path: str) -> str | None:
        """`text(path)`, or None where the commit's tree has no such file (before it was added,
        after a move)."""
        try:
            return self.text(path)
        except MirrorMissing:
            return None

    def raw(self, path: str) -> bytes:
        return self._git("show", f"{self.commit}:{path}", binary=True)

    @cached_property
    def date(self) -> str:
        """The commit's date, YYYY-MM-DD (committer date, as GitHub shows it)."""
        return self._git("show", "-s", "--format=%cs", self.commit).strip()

    def last_change(self, path: str) -> tuple[str, str]:
        """(commit, YYYY-MM-DD) of the last commit at or before `commit` that changed `path`."""
        line = self._git("log", "-1", "--format=%H %cs", self.commit, "--", path).strip()
        if not line:
            raise MirrorMissing(f"{self.repo}: no commit touches {path}")
        sha, day = line.split()
        return sha, day

    def at(self, commit: str) -> "Mirror":
        """The same repository read at another commit."""
        return Mirror(repo=self.repo, git_dir=self.git_dir, commit=commit, timeout_s=self.timeout_s)

    def versions(self, path: str, *log_options: str):
        """(mirror at the commit, text) of every version of `path` in the history up to `commit`,
        oldest first (`log_options`: e.g. "--first-parent")."""
        for sha in self._git("log", *log_options, "--reverse", "--format=%H", self.commit, "--", path).split():
            text = self.at(sha).text_if_present(path)
            if text is not None:
                yield self.at(sha), text

    def cite(self, path: str, commit: str | None = None) -> str:
        """`owner/name path@commit12`: how a row names where it was read."""
        return f"{self.repo} {path}@{(commit or self.commit)[:12]}"


def open_mirror(root: Path, repo: str, commit: str, timeout_s: float | None = None) -> Mirror:
    """The git copy of `repo` under `root`: `root/owner+name/repo` (the layout the search tool's
    fetch writes), `root/owner+name`, `root/owner/name` or `root/name`, bare or with a `.git`.
    Every git call on it is stopped after `timeout_s` seconds (default GIT_TIMEOUT_S) with a
    one-line MirrorMissing."""
    owner, name = repo.split("/")
    for candidate in (root / f"{owner}+{name}" / "repo", root / f"{owner}+{name}", root / owner / name, root / name):
        for git_dir in (candidate / ".git", candidate):
            if (git_dir / "HEAD").is_file() and (git_dir / "objects").is_dir():
                mirror = Mirror(repo=repo, git_dir=git_dir, commit=commit, timeout_s=timeout_s)
                full = mirror._git("rev-parse", "--verify", f"{commit}^{{commit}}").strip()
                return Mirror(repo=repo, git_dir=git_dir, commit=full, timeout_s=timeout_s)
    raise MirrorMissing(f"no git copy of {repo} under {root} (fetch it with git first: git clone --mirror "
                        f"https://github.com/{repo} {root}/{owner}+{name}/repo)")

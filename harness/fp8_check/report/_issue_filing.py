"""Issues for `fp8-check ci`: one body per upstream change, and filing them with `gh`.

One XLA change usually breaks several cases at once; they get ONE issue: regressions are grouped by
their first bad JAX version, target, profile, mode and signature change (the verdict's lines, else the
golden's field differences, else the outcome and the first line of its reason). A group's identity is
a hash of that; it is written as the body's LAST line, in one fixed form:

    <!-- fp8-check-issue: 0123456789abcdef -->

and read back from an issue's last non-empty line only, so a marker quoted anywhere else (a reason, a
comment pasted into the body) never decides which issue is edited. Body file names carry the same hash:
two case ids that sanitise alike (`seed+x`, `seed_x`) never share a file.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fp8_check.core import from_env, run
from fp8_check.matrix import Finding
from fp8_check.report._markup import plain

MARKER = "<!-- fp8-check-issue: {key} -->"
_MARKER = re.compile(r"<!-- fp8-check-issue: ([0-9a-f]{16}) -->")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class FilingError(Exception):
    """gh failed, hung or answered something that is not what was asked: one line, exit 3."""


@dataclass
class Group:
    key: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The body's file name: the first case (readable) and the key (unique)."""
        return _UNSAFE.sub("_", self.findings[0].outcome.case)[:80] + "--" + self.key + ".md"


def _plain(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def change_of(f: Finding) -> list:
    """What changed in the signature, free of the case's name."""
    o = f.outcome
    if o.verdict is not None and o.verdict.lines:
        return sorted([x.path, _plain(x.before), _plain(x.after), x.cls] for x in o.verdict.lines)
    if o.diffs:
        return sorted([d.path, _plain(d.expected), _plain(d.found)] for d in o.diffs)
    first = (o.reason or "").strip().splitlines()
    return [o.code.name, first[0][:200] if first else ""]


def group_key(f: Finding) -> str:
    o = f.outcome
    ident = _plain([f.jax, o.target, o.profile, o.mode, o.code.name, change_of(f)])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def groups(regressions: list[Finding]) -> list[Group]:
    """One group per upstream change, in the order of their first finding; members sorted by case id."""
    out: dict[str, Group] = {}
    for f in regressions:
        k = group_key(f)
        out.setdefault(k, Group(k)).findings.append(f)
    for g in out.values():
        g.findings.sort(key=lambda f: f.outcome.case)
    return list(out.values())


def marker_of(body: str) -> str | None:
    """The key of a body's own marker: its last non-empty line, exactly in the fixed form; else None."""
    lines = [line for line in (body or "").splitlines() if line.strip()]
    m = _MARKER.fullmatch(lines[-1].strip()) if lines else None
    return m.group(1) if m else None


def _timeout() -> float:
    return from_env("FP8_CHECK_GH_TIMEOUT", 120.0)  # a bad value: one line, exit 2


def _gh(argv: list[str]) -> str:
    limit = _timeout()
    what = " ".join(argv[1:3])
    try:
        p = run(argv, limit)
    except subprocess.TimeoutExpired:
        raise FilingError(f"gh {what} did not finish within {limit:g} s (FP8_CHECK_GH_TIMEOUT)") from None
    except OSError as exc:
        raise FilingError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if p.returncode != 0:
        last = (p.stderr or p.stdout).strip().splitlines()
        raise FilingError(f"gh {what} failed (exit {p.returncode})" + (f": {_one_line(last[-1])}" if last else ""))
    return p.stdout


def _one_line(text: str) -> str:
    """A line of another program's output, safe to print: no control characters, no `::` at its start."""
    return _CONTROL.sub(" ", text)[:300].lstrip(": ")


def _existing(gh: str, repo_args: list[str], label: str) -> dict[str, int]:
    text = _gh([gh, "issue", "list", *repo_args, "--state", "open", "--label", label, "--limit", "1000",
                "--json", "number,body"])
    try:
        listed = json.loads(text or "[]")
    except ValueError:
        raise FilingError("gh issue list printed something that is not JSON") from None
    if not isinstance(listed, list) or not all(isinstance(i, dict) and type(i.get("number")) is int for i in listed):
        raise FilingError("gh issue list printed JSON that is not a list of issues with numbers")
    existing: dict[str, int] = {}
    for issue in sorted(listed, key=lambda i: i["number"]):
        key = marker_of(issue.get("body") if isinstance(issue.get("body"), str) else "")
        if key:
            existing.setdefault(key, issue["number"])
    return existing


def file_issues(issues_dir: Path, label: str, repo: str | None, gh: str = "gh") -> list[str]:
    """Open or update one issue per body in `issues_dir` (identity: the body's own marker). Returns what it did."""
    repo_args = ["--repo", repo] if repo else []
    existing = _existing(gh, repo_args, label)
    done: list[str] = []
    try:
        for path in sorted(issues_dir.glob("*.md")):
            _file_one(path, existing, repo_args, label, gh, done)
    except FilingError as exc:  # what was filed before the failure is said too: a rerun would not show it
        if done:
            raise FilingError(f"{exc}; before that: {'; '.join(done)}") from None
        raise
    return done


def _file_one(path: Path, existing: dict[str, int], repo_args: list[str], label: str, gh: str, done: list[str]) -> None:
    """One body: edit the issue its marker names, or create one; what was done is appended to `done`."""
    text = path.read_text(encoding="utf-8", errors="replace")
    key = marker_of(text)
    if key is None:
        done.append(f"skipped {_one_line(path.name)}: its last line is not an fp8-check marker")
        return
    first = text.splitlines()[0] if text else ""
    title = _CONTROL.sub(" ", plain(first.lstrip("# ").strip()))[:240] or path.stem
    if key in existing:
        _gh([gh, "issue", "edit", str(existing[key]), *repo_args, "--body-file", str(path)])
        done.append(f"updated #{existing[key]}: {_one_line(title)}")
    else:
        printed = _gh([gh, "issue", "create", *repo_args, "--title", title, "--body-file", str(path), "--label", label])
        number = re.search(r"/issues/(\d+)\s*$", printed or "")
        done.append(f"created{f' #{number.group(1)}' if number else ''}: {_one_line(title)}")

"""Replay a project's fp8-check CI on this machine: the jobs of the workflow `fp8-check init` wrote, step by step.

    bash scripts/env.sh python scripts/replay_ci.py PROJECT [--event push] [--branch NAME] [--input NAME=VALUE ...]
                                                           [--work DIR]

PROJECT is a git repository whose .github/workflows/fp8-check.yml calls a reusable workflow in the same repository
(`uses: ./…`). `--event` (default push; pull_request, schedule, workflow_dispatch) is the event replayed: the caller's
`on:` must name it, and its job's `if:` is evaluated with `github.event_name`, `github.ref`/`ref_name` (a push: the
branch, default the project's current one, which stands for the default branch) and
`github.event.repository.default_branch` (the project's current branch). The called workflow's jobs run in their
`needs:` order, each in a fresh clone of PROJECT's HEAD (what actions/checkout gives a job) with its own RUNNER_TEMP,
GITHUB_OUTPUT, GITHUB_PATH and GITHUB_STEP_SUMMARY; a job with a strategy matrix runs once per value of its one axis,
or once per entry of its `include:` list (the resolve job's `jobs`: one per JAX version x target group). Each `run:` step is the workflow's own script, run by
bash (`-eo pipefail`, as GitHub's default shell) or python (`shell: python`). Inputs: the reusable workflow's defaults,
then the caller's `with:`, then --input. Expressions (`${{ … }}`) are evaluated for what the workflow uses: contexts
inputs, matrix, needs, steps, strategy, github, vars; `==`, `!=`, `&&`, `||`, `!`, parentheses; always(), success(),
failure(), fromJSON(), format(). The actions a job uses are replaced by what they do here:

- actions/checkout: the job's workspace is a `git clone` of PROJECT (its committed state);
- actions/setup-python, astral-sh/setup-uv: this Python's and uv's directories go first on PATH (uv's cache is the
  machine's: what setup-uv would restore);
- actions/upload-artifact / download-artifact: copied into and out of WORK/artifacts/NAME (the paths' common folder
  is the artifact's root; a `pattern` download puts each artifact in a folder of its name).

What it cannot replay: GitHub's runners themselves (their images, disk, time limits) and its cache service; the
`issues` job (it opens GitHub issues) is skipped. Prints every step with its output and a last line `replay: …`;
exit 0 when every job succeeded, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SKIPPED_JOBS = {"issues"}  # talks to GitHub's issue tracker


class ReplayError(Exception):
    """The workflow asks for something the replay cannot do (one line)."""


# ------------------------------------------------------------------ expressions


_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ReplayError(f"cannot read the expression {text!r} at {text[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Expr:
    """A recursive-descent reader of the expression subset the workflows use; values are Python values."""

    def __init__(self, text: str, ctx: dict):
        self.toks, self.i, self.ctx, self.text = _tokens(text), 0, ctx, text

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ReplayError(f"expression {self.text!r}: expected {value or 'more'}")
        self.i += 1
        return tok

    def value(self):
        v = self.or_()
        if self.peek() is not None:
            raise ReplayError(f"expression {self.text!r}: unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return v

    def or_(self):
        v = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            w = self.and_()
            v = v or w
        return v

    def and_(self):
        v = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            w = self.cmp()
            v = v and w
        return v

    def cmp(self):
        v = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            w = self.unary()
            same = (str(v).lower() == str(w).lower()) if isinstance(v, str) or isinstance(w, str) else v == w
            v = same if op == "==" else not same
        return v

    def unary(self):
        if self.peek() == ("op", "!"):
            self.take()
            return not self.unary()
        return self.atom()

    def atom(self):
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if (kind, text) == ("op", "("):
            v = self.or_()
            self.take(")")
            return v
        if kind != "name":
            raise ReplayError(f"expression {self.text!r}: unexpected {text!r}")
        if self.peek() == ("op", "("):  # a function
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            return self.call(text, args)
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        return self.lookup(text)

    def call(self, name: str, args: list):
        status = self.ctx.get("__job_status__", "success")
        if name == "always":
            return True
        if name == "success":
            return status == "success"
        if name == "failure":
            return status == "failure"
        if name == "cancelled":
            return False
        if name == "fromJSON" and len(args) == 1:
            return json.loads(args[0])
        if name == "format" and args:
            return re.sub(r"\{(\d+)\}", lambda m: _string(args[1 + int(m.group(1))]), str(args[0]))
        raise ReplayError(f"expression {self.text!r}: function {name}() is not replayed")

    def lookup(self, path: str):
        value: object = self.ctx
        for part in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*|\[\d+\]", path):
            if part.startswith("["):
                value = value[int(part[1:-1])] if isinstance(value, list) else None
            else:
                value = value.get(part) if isinstance(value, dict) else None
        return value


def evaluate(text: str, ctx: dict):
    return _Expr(text, ctx).value()


def _string(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def substitute(value, ctx: dict):
    """`${{ … }}` inside a string replaced by its value (a whole-string expression keeps its type)."""
    if not isinstance(value, str):
        return value
    whole = re.fullmatch(r"\s*\$\{\{(.*?)\}\}\s*", value, re.S)
    if whole and value.count("${{") == 1:
        return evaluate(whole.group(1), ctx)
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _string(evaluate(m.group(1), ctx)), value, flags=re.S)


def condition(text, ctx: dict) -> bool:
    if text is None:
        return ctx.get("__job_status__", "success") == "success"
    if isinstance(text, bool):
        return text
    text = str(text).strip()
    inner = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    expr = inner.group(1) if inner else text
    if not re.search(r"\b(always|success|failure|cancelled)\(", expr):
        expr = f"success() && ({expr})"
    return bool(evaluate(expr, ctx))


# ------------------------------------------------------------------ the replay


def _load(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReplayError(f"{path}: cannot read it as YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ReplayError(f"{path}: not a workflow")
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def _order(jobs: dict) -> list[str]:
    done: list[str] = []
    while len(done) < len(jobs):
        ready = [j for j, spec in jobs.items() if j not in done and all(
            n in done for n in ([spec.get("needs")] if isinstance(spec.get("needs"), str) else spec.get("needs") or []))]
        if not ready:
            raise ReplayError("the jobs' needs: form a cycle")
        done.append(ready[0])
    return done


EVENTS = ("push", "pull_request", "schedule", "workflow_dispatch")


def _branch(project: Path) -> str:
    p = subprocess.run(["git", "-C", str(project), "symbolic-ref", "--short", "HEAD"], capture_output=True, text=True,
                       timeout=60)
    return p.stdout.strip() or "main"


class Replay:
    def __init__(self, project: Path, work: Path, overrides: dict[str, str], log=print, event: str = "push",
                 branch: str | None = None):
        self.project, self.work, self.log = project.resolve(), work.resolve(), log
        caller = _load(self.project / ".github" / "workflows" / "fp8-check.yml")
        on = caller.get("on")
        events = [on] if isinstance(on, str) else list(on or [])
        if event not in events:
            raise ReplayError(f"the caller's on: ({', '.join(map(str, events)) or 'nothing'}) does not name {event!r}")
        default = _branch(self.project)
        ref_name = (branch or default) if event != "pull_request" else "1/merge"
        self.github = {"workspace": "", "token": "", "repository": "local/project", "run_id": "1", "event_name": event,
                       "ref": ("refs/heads/" if event != "pull_request" else "refs/pull/") + ref_name,
                       "ref_name": ref_name, "event": {"repository": {"default_branch": default}}}
        [(self.caller_job, job)] = [(n, j) for n, j in (caller.get("jobs") or {}).items() if "uses" in j]
        self.caller_if = job.get("if")
        uses = str(job["uses"])
        if not uses.startswith("./"):
            raise ReplayError(f"the caller uses {uses!r}: only a reusable workflow in the project (./…) is replayed")
        self.workflow = _load(self.project / uses[2:])
        declared = ((self.workflow.get("on") or {}).get("workflow_call") or {}).get("inputs") or {}
        self.inputs = {k: v.get("default", "" if v.get("type") != "boolean" else False) for k, v in declared.items()}
        for k, v in {**(job.get("with") or {}), **overrides}.items():
            if k not in declared:
                raise ReplayError(f"input {k!r} is not declared by {uses}")
            self.inputs[k] = v
        self.artifacts = self.work / "artifacts"
        self.skipped_caller = False
        self.results: dict[str, dict] = {}  # needs.<job>: result, outputs
        self.seconds: dict[str, float] = {}

    def run(self) -> bool:
        jobs = self.workflow.get("jobs") or {}
        ok = True
        if not condition(self.caller_if, {"github": self.github, "vars": {}, "inputs": {}}):
            self.log(f"== caller job {self.caller_job}: skipped on {self.github['event_name']} of {self.github['ref']} "
                     f"(if: {self.caller_if})")
            self.skipped_caller = True
            return True
        for name in _order(jobs):
            spec = jobs[name]
            if name in SKIPPED_JOBS:
                self.log(f"== job {name}: not replayed (it files GitHub issues)")
                self.results[name] = {"result": "skipped", "outputs": {}}
                continue
            ctx = self._context(name, spec)
            if not condition(spec.get("if"), ctx):
                self.log(f"== job {name}: skipped (if: {spec.get('if')})")
                self.results[name] = {"result": "skipped", "outputs": {}}
                continue
            strategy = (spec.get("strategy") or {}).get("matrix")
            combos: list[dict] = [{}]
            if strategy is not None:
                axes = {k: substitute(v, ctx) for k, v in strategy.items()}
                if list(axes) == ["include"] and isinstance(axes["include"], list) \
                        and all(isinstance(c, dict) for c in axes["include"]):
                    combos = axes["include"]  # one job per entry (e.g. JAX version x target group)
                elif len(axes) != 1 or not isinstance(next(iter(axes.values())), list):
                    raise ReplayError(f"job {name}: only a one-axis strategy matrix or an include: list is replayed")
                else:
                    [(axis, values)] = axes.items()
                    combos = [{axis: v} for v in values]
                if not combos:
                    raise ReplayError(f"job {name}: its strategy matrix is empty")
            result, outputs = "success", {}
            for index, combo in enumerate(combos):
                label = f"{name} ({', '.join(f'{k}={v}' for k, v in combo.items())})" if combo else name
                start = time.perf_counter()
                good, outs = self._job(name, label, spec, dict(ctx, matrix=combo, strategy={"job-index": index}))
                self.seconds[label] = round(time.perf_counter() - start, 1)
                self.log(f"== job {label}: {'success' if good else 'failure'} in {self.seconds[label]} s")
                result = result if good else "failure"
                outputs.update(outs)
            self.results[name] = {"result": result, "outputs": outputs}
            ok = ok and result == "success"
        return ok

    def _context(self, name: str, spec: dict) -> dict:
        needs = [spec["needs"]] if isinstance(spec.get("needs"), str) else spec.get("needs") or []
        return {"inputs": self.inputs, "needs": {n: self.results[n] for n in needs}, "vars": {}, "secrets": {},
                "github": dict(self.github)}

    def _job(self, name: str, label: str, spec: dict, ctx: dict) -> tuple[bool, dict]:
        if "uses" in spec:
            raise ReplayError(f"job {name} calls another workflow: not replayed")
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")
        home = self.work / "jobs" / slug
        if home.exists():
            shutil.rmtree(home)
        workspace, temp = home / "workspace", home / "runner-temp"
        temp.mkdir(parents=True)
        p = subprocess.run(["git", "clone", "--quiet", str(self.project), str(workspace)], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            raise ReplayError(f"git clone {self.project}: {p.stderr.strip()}")
        ctx["github"] = dict(ctx["github"], workspace=str(workspace))
        ctx["steps"], ctx["__job_status__"] = {}, "success"
        ctx["runner"] = {"temp": str(temp)}
        path_extra: list[str] = []
        env_base = {k: v for k, v in os.environ.items()  # a runner has none of the harness's or the tests' settings
                    if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")
                    and not k.startswith(("FP8_CHECK_", "UV_"))}
        env_base.update(CI="true", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(workspace), RUNNER_TEMP=str(temp),
                        GITHUB_REPOSITORY="local/project", GITHUB_RUN_ID="1",
                        GITHUB_EVENT_NAME=self.github["event_name"], GITHUB_REF=self.github["ref"], GITHUB_SERVER_URL="file://" + str(self.work),
                        GITHUB_API_URL="http://127.0.0.1:9", GITHUB_STEP_SUMMARY=str(home / "step-summary.md"))
        env_base["PATH"] = os.pathsep.join(p for p in env_base.get("PATH", "").split(os.pathsep)
                                           if ".venv" not in p and "/shims" not in p)  # nothing of the harness's own venv
        job_env = {k: _string(substitute(v, ctx)) for k, v in (spec.get("env") or {}).items()}
        defaults = ((spec.get("defaults") or {}).get("run") or {})
        for i, step in enumerate(spec.get("steps") or []):
            sid = step.get("id") or f"__{i}"
            title = _string(substitute(step.get("name") or step.get("uses") or f"step {i}", ctx))
            if not condition(step.get("if"), ctx):
                self.log(f"-- {label} / {title}: skipped")
                continue
            env = dict(env_base, **job_env, **{k: _string(substitute(v, ctx)) for k, v in (step.get("env") or {}).items()})
            env["PATH"] = os.pathsep.join([*path_extra, env_base["PATH"]])
            outputs_file = home / f"output-{i}"
            path_file = home / f"path-{i}"
            env.update(GITHUB_OUTPUT=str(outputs_file), GITHUB_PATH=str(path_file), GITHUB_ENV=str(home / f"env-{i}"))
            self.log(f"-- {label} / {title}")
            if "uses" in step:
                good = self._action(str(step["uses"]), {k: substitute(v, ctx) for k, v in (step.get("with") or {}).items()},
                                    workspace, path_extra)
            else:
                cwd = workspace / _string(substitute(step.get("working-directory") or defaults.get("working-directory")
                                                     or ".", ctx))
                good = self._script(step, step["run"], cwd, env, home, i)
            if outputs_file.exists():
                ctx["steps"][sid] = {"outputs": dict(line.split("=", 1) for line in
                                                     outputs_file.read_text().splitlines() if "=" in line)}
            if path_file.exists():
                path_extra[:0] = [line for line in path_file.read_text().splitlines() if line][::-1]
            if not good:
                ctx["__job_status__"] = "failure"
        outputs = {k: _string(substitute(v, ctx)) for k, v in (spec.get("outputs") or {}).items()}
        return ctx["__job_status__"] == "success", outputs

    def _script(self, step: dict, script: str, cwd: Path, env: dict, home: Path, i: int) -> bool:
        shell = step.get("shell", "bash")
        if shell == "python":
            file = home / f"step-{i}.py"
            file.write_text(script)
            cmd = [env_python(), str(file)]
        elif shell == "bash":
            cmd = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]
        else:
            raise ReplayError(f"shell {shell!r} is not replayed")
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=float(os.environ.get("FP8_CHECK_REPLAY_STEP_TIMEOUT") or 3600))
        for line in p.stdout.splitlines():
            self.log(f"   {line}")
        if p.returncode != 0:
            self.log(f"   (exit {p.returncode})")
        return p.returncode == 0

    def _action(self, uses: str, with_: dict, workspace: Path, path_extra: list[str]) -> bool:
        action = uses.split("@")[0]
        if action == "actions/checkout":
            return True  # the workspace is a clone of the project's HEAD already
        if action == "actions/setup-python":
            path_extra.insert(0, str(Path(env_python()).parent))
            return True
        if action == "astral-sh/setup-uv":
            from fp8_check.versions._uvbin import find_uv

            uv = find_uv()
            if not uv:
                raise ReplayError("no uv to stand in for astral-sh/setup-uv")
            tools = self.work / "uv-bin"  # uv alone (its own folder may be a virtual environment's bin)
            tools.mkdir(parents=True, exist_ok=True)
            if not (tools / "uv").exists():
                (tools / "uv").symlink_to(uv)
            path_extra.insert(0, str(tools))
            return True
        if action == "actions/upload-artifact":
            return self._upload(str(with_["name"]), [p.strip() for p in str(with_["path"]).splitlines() if p.strip()],
                                workspace)
        if action == "actions/download-artifact":
            return self._download(with_, workspace)
        raise ReplayError(f"the action {uses} is not replayed")

    def _upload(self, name: str, paths: list[str], workspace: Path) -> bool:
        found = [workspace / p for p in paths if (workspace / p).exists()]
        if not found:
            self.log(f"   warning: no files for artifact {name}")
            return True
        root = Path(os.path.commonpath([str(p if p.is_dir() and len(found) == 1 else p.parent) for p in found]))
        dest = self.artifacts / name
        if dest.exists():
            shutil.rmtree(dest)
        for p in found:
            target = dest / p.relative_to(root)
            if p.is_dir():
                shutil.copytree(p, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, target)
        self.log(f"   uploaded artifact {name}")
        return True

    def _download(self, with_: dict, workspace: Path) -> bool:
        path = workspace / str(with_.get("path") or ".")
        names = sorted(d.name for d in self.artifacts.iterdir()) if self.artifacts.is_dir() else []
        if with_.get("name"):
            if with_["name"] not in names:
                self.log(f"   no artifact {with_['name']}")
                return False
            shutil.copytree(self.artifacts / str(with_["name"]), path, dirs_exist_ok=True)
            return True
        for n in [n for n in names if fnmatch.fnmatchcase(n, str(with_.get("pattern") or "*"))]:
            shutil.copytree(self.artifacts / n, path / n, dirs_exist_ok=True)
            self.log(f"   downloaded artifact {n}")
        return True


def env_python() -> str:
    """The interpreter setup-python stands for: this Python's base installation (not a virtual environment)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                        help="override an input of the reusable workflow (after the caller's with:)")
    parser.add_argument("--event", choices=EVENTS, default="push", help="the event replayed (default: push)")
    parser.add_argument("--branch", help="a push's branch (default: the project's current branch, standing for the "
                                         "default branch)")
    parser.add_argument("--work", type=Path, help="where the jobs' workspaces and the artifacts go (default: a new "
                                                  "temporary directory, kept)")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.input:
        if "=" not in item:
            print(f"replay: error: --input {item!r} is not NAME=VALUE", file=sys.stderr)
            return 2
        k, v = item.split("=", 1)
        overrides[k] = v
    work = args.work or Path(tempfile.mkdtemp(prefix="fp8-check-replay-"))
    try:
        replay = Replay(args.project, work, overrides, log=lambda s: print(s, flush=True), event=args.event,
                        branch=args.branch)
        ok = replay.run()
    except ReplayError as exc:
        print(f"replay: error: {exc}", file=sys.stderr)
        return 2
    times = ", ".join(f"{k} {v} s" for k, v in replay.seconds.items())
    if replay.skipped_caller:
        print(f"replay: the caller's job does not run on this {args.event}; jobs and artifacts in {work}")
        return 0
    print(f"replay: {'every job succeeded' if ok else 'a job failed'} on {args.event} ({times}); jobs and artifacts in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

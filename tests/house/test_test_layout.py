"""The tests are grouped as the code is (docs/layout.md, "Tests"): tests/<stage>/ for a stage of
harness/fp8_check/stages.py, tests/ci/ and tests/house/, each folder a package, every test file in one of
them and named for a behaviour, not for the work item that added it. Read from the tree; nothing is imported.
"""

from __future__ import annotations

import re

from fp8_check import stages

from ..conftest import REPO

TESTS = REPO / "tests"
GROUPS = {*stages.NAMES, "ci", "house"}
DATA = {"fixtures", "hostile", "__pycache__"}  # data and caches: no tests
# Test files still at the top of tests/ -> why.
AT_THE_TOP: dict[str, str] = {}
WORK_ITEM = re.compile(r"round_?\d|hardening|issue_?\d")


def _test_files(root=TESTS):
    return sorted(p for p in root.rglob("test_*.py") if not DATA & set(p.relative_to(root).parts))


def misplaced(root=TESTS) -> list[str]:
    """Test files outside a group folder (but those AT_THE_TOP), or named for a work item."""
    out = []
    for p in _test_files(root):
        rel, parts = p.relative_to(root).as_posix(), p.relative_to(root).parts
        if not (len(parts) == 2 and parts[0] in GROUPS or len(parts) == 1 and rel in AT_THE_TOP) or WORK_ITEM.search(p.name):
            out.append(rel)
    return out


def stray_folders(root=TESTS) -> list[str]:
    """Folders of tests/ that are not a group, or not a package."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in DATA
                  and (p.name not in GROUPS or not (p / "__init__.py").is_file()))


def test_every_test_file_sits_in_a_group_folder_under_a_behaviour_name():
    assert misplaced() == []


def test_every_folder_is_a_group_and_a_package():
    assert stray_folders() == []


def test_no_two_test_files_share_a_name():
    names = [p.name for p in _test_files()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_file_left_at_the_top_is_there():
    assert [name for name in AT_THE_TOP if not (TESTS / name).is_file()] == []


def test_the_rules_find_a_planted_misplacement(tmp_path):
    for folder in ("verdict", "fixtures", "misc", "cost"):
        (tmp_path / folder).mkdir()
    (tmp_path / "verdict" / "__init__.py").write_text("")
    (tmp_path / "misc" / "__init__.py").write_text("")
    for rel in ("test_flat.py", "verdict/test_ok.py", "verdict/test_hardening_round9.py", "fixtures/test_data.py"):
        (tmp_path / rel).write_text("")
    assert misplaced(tmp_path) == ["test_flat.py", "verdict/test_hardening_round9.py"]
    assert stray_folders(tmp_path) == ["cost", "misc"]  # cost/ has no __init__.py; misc is no group

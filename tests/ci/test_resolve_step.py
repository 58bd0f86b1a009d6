"""The reusable workflow's resolve step (`Which fp8-check to install`) against a hostile Actions API: a stand-in
HTTP server on 127.0.0.1 that redirects to another origin, trickles its answer, or answers with values holding
workflow commands and malformed shapes. The step must send the job's token to the API origin only, bound its
total time, print nothing taken from the answer (no `::` line but its own `::error::`) and end every failure in
one line, exit 2, without a traceback."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ..house.test_package import _env, _reusable_step, _run

SHA = "a" * 40
GOOD = {"referenced_workflows": [{"path": "someone/fp8-check/.github/workflows/fp8-check.yml@refs/heads/main", "sha": SHA}]}


class Server:
    """`answer(handler)` serves every GET; `seen` records (path, Authorization) of each request."""

    def __init__(self, answer):
        self.seen: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.seen.append((self.path, self.headers.get("Authorization")))
                answer(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _json(body: bytes, status: int = 200, reason: str | None = None):
    def answer(h):
        h.send_response(status, reason)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return answer


def _resolve(tmp_path, api_url: str, requirement: str = "", seconds: float | str = 20):
    step = _reusable_step("Which fp8-check to install")
    out = tmp_path / "github-output"
    out.unlink(missing_ok=True)
    env = dict(_env(), REQUIREMENT=requirement, TOKEN="job-token", GITHUB_API_URL=api_url,
               GITHUB_SERVER_URL="https://example.invalid", GITHUB_REPOSITORY="caller/project", GITHUB_RUN_ID="42",
               GITHUB_OUTPUT=str(out), FP8_CHECK_RESOLVE_SECONDS=str(seconds))
    p = _run([getattr(sys, "_base_executable", sys.executable), "-I", "-c", step["run"]], tmp_path, env, timeout=120)
    return p, (out.read_text() if out.exists() else "")


def _refused(p, written: str) -> str:
    """The step failed in one `::error::` line, exit 2, no traceback, no output; the line."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert not p.stderr and written == "", (p.stderr, written)
    [line] = p.stdout.splitlines()
    assert line.startswith("::error::cannot tell which fp8-check to install")
    return line


def test_a_good_answer_still_resolves(tmp_path):
    api = Server(_json(json.dumps(GOOD).encode()))
    try:
        p, written = _resolve(tmp_path, api.url)
    finally:
        api.close()
    assert p.returncode == 0, p.stdout + p.stderr
    assert written == f"requirement=fp8-check[flax] @ git+https://example.invalid/someone/fp8-check@{SHA}\n"
    assert [a for _, a in api.seen] == ["Bearer job-token"]


def test_the_token_never_follows_a_redirect_to_another_origin(tmp_path):
    other = Server(_json(json.dumps(GOOD).encode()))

    def redirect(h):
        h.send_response(302)
        h.send_header("Location", other.url + "/steal")
        h.send_header("Content-Length", "0")
        h.end_headers()

    api = Server(redirect)
    try:
        p, written = _resolve(tmp_path, api.url)
    finally:
        api.close()
        other.close()
    line = _refused(p, written)
    assert "another origin" in line and other.seen == []  # not followed at all (the anonymous retry neither)
    assert [a for _, a in api.seen] == ["Bearer job-token", None]


def test_a_trickling_answer_is_bounded_in_total_time(tmp_path):
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(60):  # one byte a second: each read is quick, the whole never ends
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(1)

    api = Server(trickle)
    try:
        start = time.monotonic()
        p, written = _resolve(tmp_path, api.url, seconds=3)
        elapsed = time.monotonic() - start
    finally:
        api.close()
    line = _refused(p, written)
    assert "no answer within 3 s" in line and elapsed < 15, (line, elapsed)


def test_one_deadline_bounds_every_try_together(tmp_path):
    """Issue 43: the token try and the anonymous try each had the whole deadline (a trickling server held the
    step 120 s against its limit). Now both share one: the second try finds none left."""
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(60):
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(1)

    api = Server(trickle)
    try:
        start = time.monotonic()
        p, written = _resolve(tmp_path, api.url, seconds=4)
        elapsed = time.monotonic() - start
    finally:
        api.close()
    line = _refused(p, written)
    assert line.count("no answer within 4 s") == 2 and elapsed < 7, (line, elapsed)  # two tries of 4 s: 8 s and more


@pytest.mark.parametrize("seconds", ["inf", "nan", "-1", "0", "abc", "1e12"])
def test_a_bad_deadline_is_one_line(tmp_path, seconds):
    p, written = _resolve(tmp_path, "http://127.0.0.1:9", seconds=seconds)
    assert p.returncode == 2 and not p.stderr and written == "", (p.returncode, p.stdout, p.stderr)
    assert p.stdout.splitlines() == ["::error::$FP8_CHECK_RESOLVE_SECONDS: expected a number of seconds above 0 and "
                                     "at most 3600"]


COMMANDS = "\n::add-mask::x\n::set-output name=requirement::evil\n::stop-commands::abc\n"
HOSTILE = {
    "sha holds commands": {"referenced_workflows": [dict(GOOD["referenced_workflows"][0], sha=SHA + COMMANDS)]},
    "path holds commands": {"referenced_workflows": [dict(GOOD["referenced_workflows"][0],
                                                         path="a/b/.github/workflows/fp8-check.yml@main" + COMMANDS)]},
    "owner holds commands": {"referenced_workflows": [dict(GOOD["referenced_workflows"][0],
                                                          path="a" + COMMANDS + "/b/.github/workflows/fp8-check.yml@x")]},
    "two callers": {"referenced_workflows": GOOD["referenced_workflows"] * 2 + [
        dict(GOOD["referenced_workflows"][0], path="::error::x/y/.github/workflows/fp8-check.yml@main")]},
}
MALFORMED = {
    "a list": b"[]", "null": b"null", "a string": b'"x"', "not JSON": b"<html>::add-mask::x</html>",
    "not UTF-8": b'{"referenced_workflows": "\xff\xfe"}', "workflows a dict": b'{"referenced_workflows": {}}',
    "a number in the list": b'{"referenced_workflows": [1]}', "path a number": b'{"referenced_workflows": [{"path": 5}]}',
    "sha null": json.dumps({"referenced_workflows": [dict(GOOD["referenced_workflows"][0], sha=None)]}).encode(),
    "sha a list": json.dumps({"referenced_workflows": [dict(GOOD["referenced_workflows"][0], sha=[SHA])]}).encode(),
    "deep nesting": b"[" * 100000 + b"]" * 100000, "over 1 MiB": b'{"x": "' + b"y" * (2 << 20) + b'"}',
}


@pytest.mark.parametrize("name", list(HOSTILE) + list(MALFORMED))
def test_hostile_and_malformed_answers_end_in_one_line_that_quotes_nothing(tmp_path, name):
    body = json.dumps(HOSTILE[name]).encode() if name in HOSTILE else MALFORMED[name]
    api = Server(_json(body))
    try:
        p, written = _resolve(tmp_path, api.url)
    finally:
        api.close()
    line = _refused(p, written)
    assert "add-mask" not in line and "set-output" not in line and "::error::x" not in line[9:]


def test_an_error_status_prints_its_code_not_its_reason_phrase(tmp_path):
    api = Server(_json(b"{}", status=403, reason="Forbidden ::add-mask::secret"))
    try:
        p, written = _resolve(tmp_path, api.url)
    finally:
        api.close()
    line = _refused(p, written)
    assert "HTTP Error 403" in line and "add-mask" not in line


def test_a_requirement_input_with_a_line_break_is_refused(tmp_path):
    p, written = _resolve(tmp_path, "http://127.0.0.1:9", requirement="fp8-check\nother=value")
    assert p.returncode == 2 and written == "" and p.stdout.startswith("::error::the 'requirement' input holds a line break")

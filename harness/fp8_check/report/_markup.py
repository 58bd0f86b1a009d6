"""Untrusted text (case ids, reasons, targets and profiles from a matrix someone else wrote) made inert for the
places fp8-check prints it: Markdown table cells (no links, images, raw HTML, @mentions or autolinks) and stdout
lines a GitHub runner reads (no line starts with `::`, a workflow command, unless fp8-check wrote it)."""

from __future__ import annotations

import re

ZWSP = "\u200b"  # zero-width space: breaks a mention or an autolink without changing what a reader sees
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\x85]")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "!": "\\!", "|": "\\|", "`": "'",
             "*": "\\*", "~": "\\~", "\\": "\\\\"}
_ENTITY = re.compile("|".join(re.escape(k) for k in _ENTITIES))


def md_inline(text: object) -> str:
    """One line of inert Markdown: HTML as entities, link/image brackets and emphasis backslash-escaped, `@name`, `#123`,
    `https://…` and `www.` broken with a zero-width space so GitHub neither mentions, cross-references nor links."""
    text = _CONTROL.sub(" ", str(text)).replace("\n", " ").replace("\r", " ")
    text = re.sub(r"@(?=\w)", "@" + ZWSP, text)
    text = re.sub(r"#(?=\d)", "#" + ZWSP, text)
    text = re.sub(r":(?=//)", ":" + ZWSP, text)
    text = re.sub(r"(?i)\bwww\.", "www" + ZWSP + ".", text)
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)


def no_commands(text: str) -> str:
    """Text for stdout: a line starting with `::` (after blanks) gets a zero-width space first, so a runner does not
    read it as a workflow command; the line still reads the same. Lone carriage returns become line breaks first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"(?m)^([ \t]*)::", lambda m: m.group(1) + ZWSP + "::", text)


def code_span(text: object) -> str:
    """`text` as one inline code span (nothing inside is markup): backticks inside become quotes, one line."""
    return "`" + _CONTROL.sub(" ", str(text)).replace("\n", " ").replace("\r", " ").replace("`", "'") + "`"


def plain(line: str) -> str:
    """A line of `md_inline` output read back as plain text (an issue's title: GitHub shows it as written)."""
    import html

    text = re.sub(r"\\([\\*~|\[\]!])", r"\1", line.replace(ZWSP, ""))
    return html.unescape(text)

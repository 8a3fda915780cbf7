"""The product speaks of itself: no tracked file outside raw benchmark logs (docs/benchmarks/raw/) names the work
that made it — its sessions, the calls and budget of the device it borrowed, machines lent to it, issue numbers. A
measurement is cited by device, versions, date and command instead (docs/benchmarks/README.md).

The patterns are assembled from pieces so that this file does not match them itself (it is scanned too).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW_LOGS = "docs/benchmarks/raw/"

_SESSION = "sess" + "ion"
_ISSUE = "iss" + "ue"
_DEVICE = "dev" + "ice"
_LENT = "le" + "nt"
_DIGIT = "[" + "0-9]"
_CALL = "ca" + "ll"
_LEASE = "le" + "ase"
_S = "s"

#: One alternative per way of speaking of the work instead of the product.
PROCESS_WORDS = re.compile("|".join([
    rf"\b{_SESSION}s?[ -]{_DIGIT}",                      # a work session by number
    rf"\b(?:this|that|the|same|previous|next|last) {_SESSION}\b(?!-scoped)",
    rf"\b{_LEASE}s?\b",                                  # machines held for the work
    rf"\b{_DEVICE}(?:'s)? (?:call|budget)s?\b",         # calls and budget of the device
    rf"\b{_DEVICE}'s {_DIGIT}+-minute call\b",
    rf"\b{_LENT} (?:h{_DIGIT}|machine|gpu)",            # machines lent for the work
    rf"\bthe {_LENT} ",
    rf"\b{_ISSUE}s? #?{_DIGIT}+",                       # issue numbers
    rf"\b{_CALL}s? {_DIGIT}+ (?:of|to|and)\b",             # a numbered call of a run
    rf"(?<![\w.])s{_DIGIT}{{2}}(?='s\b|\)|/)",          # a short session name: an s and two digits
]), re.IGNORECASE)


def offending_lines(text: str) -> list[str]:
    """The lines of ``text`` that speak of the work rather than the product."""
    return [line.strip() for line in text.splitlines() if PROCESS_WORDS.search(line)]


@pytest.mark.parametrize("line", [
    f"measured in {_SESSION} 43",
    f"{_CALL} 8 of {_SESSION} 43",
    f"Stopped by the {_DEVICE} budget.",
    f"within one 10-minute {_DEVICE} call",
    f"the {_DEVICE}'s 10-minute call",
    f"on the {_LENT} H100",
    f"{_LENT} machine kinds",
    f"as measured earlier this {_SESSION}",
    f"longer than a {_LEASE}",
    f"({_ISSUE} 12)",
    f"{_CALL}s 3 to 5 ran the bench",
    f"as {_S}43's A/B predicted",
    f"raw output in h100-2026-11-27-{_S}43/",
])
def test_the_pattern_finds_each_way_of_speaking_of_the_work(line):
    assert offending_lines(line) == [line]


@pytest.mark.parametrize("line", [
    "s13, s2 = (t.float() for t in scales)",
    "each call to the kernel; calls per batch",
    "relative error budget 1e-3",
    "a pytest session-scoped fixture",
    "release the handle",
    "the device's memory; a device-side call",
    "GPU jobs 1 to 6",
    "raw/2026-11-27-weight-only-mma-in-flight/",
])
def test_the_pattern_leaves_product_words_alone(line):
    assert offending_lines(line) == []


def _tracked_files() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if inside.returncode != 0 or Path(inside.stdout.strip()).resolve() != ROOT:
        pytest.skip("not a git checkout of moe-core")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, check=True)
    return [name for name in listed.stdout.split("\0") if name and not name.startswith(RAW_LOGS)]


def test_no_tracked_file_outside_raw_logs_speaks_of_the_work():
    found = []
    for name in _tracked_files():
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (plots), or deleted and not yet staged
        found += [f"{name}: {line[:160]}" for line in offending_lines(text)]
    assert not found, "speak of the product (device, versions, date, command), not of the work:\n" + "\n".join(found)

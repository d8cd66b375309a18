"""bench/paired.py, the side-by-side comparison of two versions, still runs: an A/A comparison of HEAD with
itself finds no verdict or evaluation that differs and prints its table (its timings are not judged here)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_an_a_a_comparison_finds_the_same_verdicts_and_prints_its_table(capsys, bench_script):
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-inside-work-tree"], capture_output=True)
    if inside.returncode != 0:
        pytest.skip("not a git checkout")
    threads, path = torch.get_num_threads(), list(sys.path)
    status = bench_script("paired").main(["--base", "HEAD", "--new", "HEAD", "--ops", "atan2,mul", "--fingerprint",
                             "--repeat", "1", "--slow"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(r"^(\d+) cases", out, re.M) and int(re.search(r"^(\d+) cases", out, re.M).group(1)) >= 3
    assert "fingerprint (verdict, evaluations, the evidence's numbers): 0 of" in out
    assert re.search(r"\| median per-case gradcheck slow / gradaudit \| [0-9.]+ \| [0-9.]+ \|", out)
    # --slow lists the cases over 1.5x in either version (each row: its two ratios), under its header
    listed = out.split("| case over 1.5x gradcheck slow's time in either version |")
    assert len(listed) == 2, out
    for row in re.findall(r"^\| `[^`]+` \| ([0-9.]+) \| ([0-9.]+) \|$", listed[1], re.M):
        assert max(float(row[0]), float(row[1])) >= 1.5, out  # (printed to 2 decimals)
    # the calling process is left as it was
    assert torch.get_num_threads() == threads
    assert [p for p in sys.path if p not in path and "site-packages" not in p] == []  # (torch's imports add some)
    assert not [m for m in sys.modules if m.startswith("gradaudit_base") or m.startswith("gradaudit_new")]

"""bench/calls.py, where a check's time goes: its counts of the checked function's calls are the checks' own.

A directional check of one input whose quick stage accepts calls the function 6 times: the first forward (its graph
kept for the backward), the re-run at the same point that proves it deterministic, and Richardson's 4 points
(h, -h, 2h, -2h); gradcheck's fast mode 4 times for one input and one output (the outputs, the two points +-eps u,
and the forward of its test of a backward given undefined gradients, _test_undefined_backward_mode)."""

from __future__ import annotations

import re
import sys

import torch


def test_it_counts_each_tools_calls_and_leaves_the_process_as_it_was(capsys, bench_script):
    threads, path = torch.get_num_threads(), list(sys.path)
    status = bench_script("calls").main(["--ops", "sin", "--cases", "0", "--repeat", "1"])
    out = capsys.readouterr().out
    assert status == 0, out
    rows = re.findall(r"^\| `(sin#\d)` \| \d+ \| \d+ \| (\d+) \| \d+ \| \d+ \| (\d+) \|$", out, re.M)
    assert [r[0] for r in rows] == ["sin#0"], out  # (OpInfo has one sample of sin)
    assert all((ours, anchor) == ("6", "4") for _, ours, anchor in rows), out
    assert re.search(r"^\| around its calls \| [0-9.]+ \| [0-9.]+ \|$", out, re.M), out
    assert torch.get_num_threads() == threads
    assert [p for p in sys.path if p not in path and "site-packages" not in p] == []


def test_no_case_to_time_is_a_clear_error(capsys, bench_script):
    status = bench_script("calls").main(["--ops", "no_such_op", "--cases", "0", "--repeat", "1"])
    err = capsys.readouterr().err
    assert status == 2
    assert "error: no case to time" in err and "--ops" in err


def test_why_names_the_rule_that_asked_for_the_confirmation(capsys, bench_script):
    """maximum's first OpInfo sample holds two distinct one-element tensors: the smaller gets no gradient at all
    (autograd's vᵀJ is exactly 0 there) while the output, the larger, is not 0, so the silent-input rule asks for the
    directional confirmation; the other entry is 1, resolved by central differences (their bound, 8 ulps of
    max(1, |f|) over a step of max(1, |x|) cbrt(eps) with a safety of 10, is 1e-8 of 1 at |f| = |x|: 3e-9). Its
    calls: the first forward, the re-run at the point, two per element for central differences, and the
    confirmation's 4 points (h, -h, 2h, -2h) for the smaller input on its own (a projection moving both inputs at
    once cannot resolve a term of 0, and the larger input asked for nothing): 10."""
    status = bench_script("calls").main(["--mode", "auto", "--ops", "maximum", "--cases", "0", "--repeat", "1",
                                         "--why"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(r"^\| `maximum#0` \| \d+ \| \d+ \| 10 \| \d+ \| \d+ \| \d+ \| run: silent \|$", out, re.M), out
    assert re.search(r"^\| run: silent \| \d+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| \d+ \|$", out, re.M), out


def test_why_refuses_directional_mode(capsys, bench_script):
    status = bench_script("calls").main(["--mode", "directional", "--ops", "sin", "--why"])
    err = capsys.readouterr().err
    assert status == 2
    assert "--why" in err and "--mode auto" in err

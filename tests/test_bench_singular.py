"""bench/singular.py, right and slightly wrong backwards near singularities, still runs: at tan's points pi/2 - 1e-1
... 1e-5 (torch's backward, 1 + tan^2, is right there to 1e-16 against mpmath) ga.check passes the right backward and
fails one off by 1e-6 in both modes; 1e-6 from the pole, where gradcheck's step of 1e-6 reaches the pole and it
fails the right backward, directional mode does not fail it."""

from __future__ import annotations

import json

import torch


def test_the_singularity_sweep_runs_on_tan(tmp_path, capsys, bench_script):
    threads = torch.get_num_threads()
    out = tmp_path / "singular.jsonl"
    assert bench_script("singular").main(["--functions", "tan", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [round(r["at"], 12) for r in rows] == [round(1.5707963267948966 - 10.0 ** -k, 12) for k in range(1, 7)]
    for r in rows[:5]:  # 1e-1 ... 1e-5 from the pole
        assert r["0"]["full"] == "pass" and r["0"]["directional"] == "pass", r
        assert r["1e-06"]["full"] == "fail" and r["1e-06"]["directional"] == "fail", r
    assert rows[-1]["0"]["gradcheck"] == "fail"  # its step of 1e-6 reaches the pole
    assert rows[-1]["0"]["directional"] != "fail"
    text = capsys.readouterr().out
    assert "| right | directional |" in text and "full and directional differ" in text
    assert torch.get_num_threads() == threads
    assert bench_script("singular").main(["--functions", "nosuch"]) == 2

"""bench/error_inputs.py, OpInfo's error_inputs through ga.check, still runs: every input that makes the function
raise gets an error verdict naming the function's own exception (none escapes the check, none is renamed), and an
unknown op is refused with exit code 2."""

from __future__ import annotations


def test_error_inputs_get_an_error_verdict_that_names_the_functions_exception(capsys, bench_script):
    bench = bench_script("error_inputs")
    counts, odd = bench.run({"cat", "scatter", "nn.functional.embedding"}, 30.0)
    named = counts["error, naming the function's exception (the one OpInfo expects)"]
    assert named >= 10, counts
    assert not counts["an exception escaped"] and not counts["timeout"], (counts, odd)
    assert not counts["error, naming another exception than the function's"], (counts, odd)
    # scatter's first error input (self float64, src float32) is no error once both are float64: its forward runs,
    # and its backward then raises (a gradient of the index's shape), as in gradcheck
    assert counts["the forward runs in float64; verdict error"] == 1, counts
    assert bench.main(["--ops", "nope"]) == 2
    assert "no error input to check" in capsys.readouterr().err

"""The examples are part of the documentation: each runs in-process (runpy) and shows what it claims."""

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "examples"
SCRIPTS = sorted(p for p in ROOT.glob("*.py") if not p.name.startswith("test_"))

#: what each example's output must show (derived from what the example plants, not from running it)
SHOWS = {
    "01_quickstart.py": ["passed, 0 failed"],
    "02_hand_graph.py": ["passed, 0 failed"],
    "03_linear_regression.py": ["passed, 0 failed"],
    "04_training_doctor.py": ["grad_accumulates", "broadcast_in_loss", "passed, 0 failed"],
    "05_precision_ladder.py": ["16 passed, 0 failed", "fail"],
    "06_custom_function.py": ["BuggySwish.apply: FAIL", "Mismatched elements: 4 / 25",
                              "the bug located at elements [0, 1, 3, 4]", "Swish.apply: PASS"],
    "07_check_module.py": ["Sequential parameters: PASS", "Sequential parameters: FAIL", "named ['1.a']"],
}


def test_every_example_is_listed():
    assert sorted(p.name for p in SCRIPTS) == sorted(SHOWS)


@pytest.mark.parametrize("name", sorted(SHOWS))
def test_example_runs_and_shows_what_it_claims(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    runpy.run_path(str(ROOT / name), run_name="__main__")  # its own asserts must hold
    out = capsys.readouterr().out
    for words in SHOWS[name]:
        assert words in out, (name, words)


def test_the_pytest_example_passes_under_pytest():
    # in-process: pytest.main on the example file, with the gradaudit plugin as an installed user has it
    code = pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / "test_with_pytest.py")])
    assert code == pytest.ExitCode.OK


def test_the_ledger_example_runs_with_the_cli(cli):
    res = cli("run", str(ROOT / "ledgers" / "linear.gradaudit.json"))
    assert res.code == 0 and "passed, 0 failed" in res.out

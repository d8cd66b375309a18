"""The notebook teaches PyTorch: per check the derivation, then the torch code a learner writes (backward and
.grad, torch.autograd.grad, the central difference written out), then gradaudit's comparison; built from the
user's own ledger with ``gradaudit notebook --from``, and executed without warnings on stderr."""

import json
import math
import re

import pytest

from gradaudit.cli import main
from gradaudit.expr import FUNCTIONS, parse
from gradaudit.render.notebook import plain_names, torch_expression, variable_names

FORMULA = "(f(x + h) - f(x - h)) / (2 * h)"

LEDGER = {"checks": [
    {"name": "x squared at 3", "function": "x*x", "x": 3.0, "analytical_gradient": 6,
     "derivation": "d/dx x^2 = 2x, which is 6 at x = 3"},
    {"name": "sum of squares", "function": "sum(x*x)", "x": [1.0, 2.0, 3.0], "analytical_gradient": [2, 4, 6],
     "derivation": "d/dx_i sum_j x_j^2 = 2 x_i"},
    {"name": "a product", "function": "x*w", "x": 2.0, "w": 5.0, "analytical_gradient": {"x": 5, "w": 2},
     "derivation": "d/dx xw = w = 5, d/dw xw = x = 2"},
    {"name": "backward twice", "function": "x*x", "x": 3.0, "methods": ["backward"],
     "protocol": ["forward", "backward", "backward"],
     "expect_error": {"type": "RuntimeError", "match": "second time", "explanation": "the graph is freed"},
     "derivation": "the first backward frees the graph, so the second one raises"},
    {"name": "cube written as 2x", "function": "x**3", "x": 2.0, "analytical_gradient": 4, "expect": "fail",
     "expect_why": "a slip kept visible: 3x^2 = 12 at x = 2", "derivation": "2x written for 3x^2"},
    {"name": "shapes that do not fit", "function": "sum(matmul(x, w))", "x": [1.0, 2.0], "w": [[1.0, 2.0, 3.0]],
     "analytical_gradient": {"x": [1, 1], "w": [[1, 1, 1]]}, "derivation": "(2,) @ (1, 3) cannot be multiplied"},
]}


@pytest.fixture
def jupyter_dirs(tmp_path, monkeypatch):
    for var in ("IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "JUPYTER_DATA_DIR"):
        path = tmp_path / var.lower()
        path.mkdir()
        monkeypatch.setenv(var, str(path))
    return tmp_path


def invoke(*argv):
    try:
        main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def text_of(output) -> str:
    if output.get("output_type") == "stream":
        return output["text"]
    return output.get("data", {}).get("text/plain", "")


#: ipykernel's race at kernel shutdown, after the notebook has run: the control channel's "idle" status is sent
#: through the IO thread's event pipe after that pipe is closed, and tornado logs the ZMQError (ENOTSOCK). Seen once
#: in a fresh clone's full run on a loaded machine (ipykernel 7.4.0, pyzmq 27.3.0); ipykernel#1518 catches the same
#: race one call later. Not ours, and not a warning from the notebook's code: it alone is left out of the check
SHUTDOWN_RACE = re.compile(r"ERROR:tornado\.general:Uncaught exception in ZMQStream callback\nTraceback \(most recent "
                           r"call last\):\n(?:  .*\n)+zmq\.error\.ZMQError: Socket operation on non-socket\n?")


def _without_shutdown_race(err: str) -> str:
    """*err* without ipykernel's ENOTSOCK traceback at kernel shutdown (SHUTDOWN_RACE); anything else stays."""
    return SHUTDOWN_RACE.sub("", err)


def no_warnings(nb, captured_err: str, raising: str = "\0") -> None:
    """No stderr stream in any cell, no error except in the torch cells of a function that raises (*raising*
    names it: as the learner's own code would, they show the error), nothing on the kernel's stderr."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            for o in cell.outputs:
                if o["output_type"] == "error":
                    assert raising in cell.source and cell.metadata["gradaudit"]["channel"], cell.source
                assert not (o["output_type"] == "stream" and o["name"] == "stderr"), (cell.source, o["text"])
    # the kernel's own stderr (inherited from this process): no TCP-encryption or frozen-modules warning
    captured_err = _without_shutdown_race(captured_err)
    assert "WARNING" not in captured_err and "without encryption" not in captured_err, captured_err
    assert "frozen" not in captured_err and "Traceback" not in captured_err, captured_err


def test_a_ledger_becomes_a_notebook_of_torch_code(jupyter_dirs, capfd):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    ledger = jupyter_dirs / "teach.json"
    ledger.write_text(json.dumps(LEDGER))
    out = jupyter_dirs / "teach.ipynb"
    assert invoke("notebook", "--from", str(ledger), "-o", str(out), "--execute") == 0
    captured = capfd.readouterr()
    assert f"notebook: {out} (executed)" in captured.out
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    no_warnings(nb, captured.err, raising="torch.matmul(x, w)")
    assert not re.search(r"seed\s*0*\d", json.dumps(nb), re.I)  # documents by name, never by seed number
    assert "the ledger `teach.json`" in nb.cells[0].source

    code = [c for c in nb.cells if c.cell_type == "code"]
    sources = "\n".join(c.source for c in code)
    assert ".backward()" in sources and "torch.autograd.grad(" in sources and FORMULA in sources
    outputs = {c.source: "".join(text_of(o) for o in c.outputs) for c in code}

    def cell(*needles):
        found = [c for c in code if all(n in c.source for n in needles)]
        assert len(found) == 1, needles
        return found[0].source

    # x*x at 3: the stored, the returned and the estimated gradient are all 2x = 6
    stored = cell("x = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)", "y = x * x\ny.backward()")
    assert stored.splitlines()[-1] == "x.grad"
    assert outputs[stored] == "tensor(6., dtype=torch.float64)"
    returned = cell("x = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)", "y = x * x\n(dx,)")
    assert "(dx,) = torch.autograd.grad(y, (x,))" in returned
    assert outputs[returned] == "(tensor(6., dtype=torch.float64), None)"  # returned; .grad stays None
    estimated = cell("def f(x):\n    return x * x", "x = torch.tensor(3.0, dtype=torch.float64)\n")
    assert estimated.splitlines()[-1] == FORMULA
    assert re.fullmatch(r"tensor\(6\.(0000)?, dtype=torch\.float64\)", outputs[estimated])

    # sum(x*x) at [1, 2, 3]: 2x = [2, 4, 6] in every channel, the difference quotient element by element
    stored = cell("x = torch.tensor([1.0, 2.0, 3.0]", "y = torch.sum(x * x)\ny.backward()")
    assert outputs[stored] == "tensor([2., 4., 6.], dtype=torch.float64)"
    estimated = cell("def f(x):\n    return torch.sum(x * x)")
    assert "(f(x + h * e) - f(x - h * e)) / (2 * h)" in estimated
    assert re.fullmatch(r"tensor\(\[2\.(0000)?, 4\.(0000)?, 6\.(0000)?\], dtype=torch\.float64\)", outputs[estimated])

    # x*w at (2, 5): d/dx = w = 5, d/dw = x = 2
    returned = cell("w = torch.tensor(5.0, dtype=torch.float64, requires_grad=True)", "torch.autograd.grad")
    assert "dx, dw = torch.autograd.grad(y, (x, w))" in returned
    assert " ".join(outputs[returned].split()) == \
        "(tensor(5., dtype=torch.float64), tensor(2., dtype=torch.float64), None, None)"

    # an expected error is caught and shown, as the ledger expects it
    twice = cell("try:", "y.backward()\n    y.backward()")
    assert "# expected: RuntimeError matching 'second time'" in twice
    assert outputs[twice].startswith("'RuntimeError: Trying to backward through the graph a second time")

    # every check: the derivation in markdown first, gradaudit's comparison last
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and c.source.startswith("gn.show_record("):
            assert "Derivation, written first" in nb.cells[i - 1].source
    # a function that raises at its point: its torch cells show the error, gradaudit's table the error verdict
    failing = [c for c in code if "torch.matmul(x, w)" in c.source]
    assert len(failing) == 3 and all(c.outputs[-1]["ename"] == "RuntimeError" for c in failing)
    shown = [c for c in code if c.source.startswith("gn.show_record(")]
    assert len(shown) == 6
    assert all(r.split()[-1] == "error" for r in outputs[shown[5].source].splitlines()[1:7])
    square = outputs[shown[0].source].splitlines()
    assert square[0].split()[:4] == ["method", "stored/returned", "expected", "observed"]
    assert [r.split()[0] for r in square[1:4]] == ["backward", "autograd.grad", "finite_difference"]
    assert all(r.split()[2] == "6" and r.split()[3] == "6" and r.split()[-1] == "pass" for r in square[1:4])
    kept = outputs[shown[4].source]
    assert "fail (expected)" in kept and "Mismatched elements: 1 / 1 (100%)" in kept
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "### x squared at 3" in c.source)
    assert "**Derivation, written first:** d/dx x^2 = 2x, which is 6 at x = 3" in nb.cells[first].source
    after = [c.source for c in nb.cells[first + 1:first + 6]]
    assert after[0].startswith("# stored") and after[1].startswith("# returned") and after[2].startswith("# estimated")
    assert "Derivation, written first" in after[3] and after[4].startswith("gn.show_record({'name': 'x squared at 3'")


def test_the_default_notebook_still_works(jupyter_dirs, capfd):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    out = jupyter_dirs / "gradcheck.ipynb"
    assert invoke("notebook", "-o", str(out), "--execute") == 0
    captured = capfd.readouterr()
    nb = nbformat.read(out, as_version=4)
    no_warnings(nb, captured.err)
    text = json.dumps(nb)
    assert not re.search(r"seed\s*0*\d", text, re.I)
    assert "the gradient-check tutorial" in nb.cells[0].source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "gn.environment()" in code[0].source
    outputs = {c.source: "".join(text_of(o) for o in c.outputs) for c in code}
    square = outputs["gn.show('tutorial', 'x squared')"]
    assert [r.split()[0] for r in square.splitlines()[1:4]] == ["backward", "autograd.grad", "finite_difference"]
    sources = "\n".join(c.source for c in code)
    assert ".backward()" in sources and "torch.autograd.grad(" in sources and FORMULA in sources
    # the tutorial's chosen step h = 1e-3 on x^3 at 2: the central difference is exactly 3x^2 + h^2 = 12.000001
    chosen = next(c for c in code if "h = 0.001  # the step the check chose" in c.source)
    assert chosen.source.splitlines()[-1] == FORMULA
    assert outputs[chosen.source] == "tensor(12.0000, dtype=torch.float64)"
    # the accumulation protocol, step by step: two fresh passes without reset store 6 + 6 = 12
    accumulated = next(c for c in code if c.source.count("y.backward()") == 2 and "grad = None" not in c.source)
    assert outputs[accumulated.source] == "tensor(12., dtype=torch.float64)"
    reset = next(c for c in code if "x.grad = None" in c.source)
    assert outputs[reset.source] == "tensor(6., dtype=torch.float64)"


def test_the_notebook_command_without_execute_and_bad_ledgers(tmp_path, capsys):
    nbformat = pytest.importorskip("nbformat")
    ledger = tmp_path / "one.toml"
    ledger.write_text('[[checks]]\nname = "sine"\nfunction = "sin(x)"\nx = 0.0\nanalytical_gradient = 1\n')
    out = tmp_path / "n.ipynb"
    assert invoke("notebook", "--from", str(ledger), "--from", str(ledger), "-o", str(out)) == 0
    nb = nbformat.read(out, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert sum("y = torch.sin(x)" in c for c in code) == 4  # stored and returned, for each of the two --from
    assert "gn.show('tutorial'" not in "\n".join(code)  # --from alone: no built-in suite
    both = tmp_path / "both.ipynb"
    assert invoke("notebook", "--from", str(ledger), "--suite", "quickstart", "-o", str(both)) == 0
    assert "gn.show('quickstart', 'x squared at x = 3')" in both.read_text()
    capsys.readouterr()
    assert invoke("notebook", "--from", str(tmp_path / "missing.json"), "-o", str(out)) == 2
    assert "no such ledger file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"function": "x*x", "x": 3}')
    assert invoke("notebook", "--from", str(bad), "-o", str(tmp_path / "b.ipynb")) == 2
    assert "analytical_gradient" in capsys.readouterr().err
    assert not (tmp_path / "b.ipynb").exists()


def test_torch_code_of_ledger_expressions():
    def code(text, names=("x",)):
        return torch_expression(parse(text, allowed_names=names), variable_names(list(names)))

    assert code("sum(x*x)") == "torch.sum(x * x)"
    assert code("softplus(x) + sigmoid(x)") == "torch.nn.functional.softplus(x) + torch.sigmoid(x)"
    assert code("maximum(x, 0)") == "torch.maximum(x, torch.tensor(0, dtype=torch.float64))"
    assert code("2*pi*x") == "2 * math.pi * x"
    assert code("-x**2") == "-x ** 2"
    assert code("matmul(w, x)", ("w", "x")) == "torch.matmul(w, x)"
    assert variable_names(["torch", "f", "x"]) == {"torch": "torch_", "f": "f_", "x": "x"}
    assert code("f*torch", ("f", "torch")) == "f_ * torch_"


def test_torch_code_agrees_with_the_ledger_for_every_function():
    """Each function of the expression language, written as torch code, computes what the ledger computes."""
    import torch

    x = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    for name in sorted(FUNCTIONS):
        for text in (f"sum({name}(x))", f"sum({name}(x, w))", f"sum({name}(x, dim=0))", f"sum({name}(x, min=0.4))"):
            try:
                expr = parse(text, allowed_names=("x", "w"))
            except Exception:
                continue
            break
        else:
            pytest.fail(f"no test expression for {name}")
        source = torch_expression(expr, variable_names(["x", "w"]))
        assert source.startswith("torch.sum(torch.") or name == "sum", source
        got = eval(source, {"torch": torch, "math": math, "x": x, "w": w})  # test code: the generated text
        want = expr({"x": x, "w": w})
        assert torch.allclose(got, want, rtol=1e-12, atol=0), (name, source)


def test_documents_are_called_by_name():
    assert plain_names("seed 001 (notebook), 'Make failures useful'") == \
        "the gradient-check tutorial, 'Make failures useful'"
    assert plain_names("Seed 000 and seed 004 (lesson)") == "the quickstart and the autograd lesson"
    assert plain_names("seed 12") == "seed 12"

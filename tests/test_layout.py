"""The shape of the code: rendering lives in render/ only, and the numerical core imports no renderer."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gradaudit"
RENDERERS = {"rich", "jinja2", "matplotlib", "nbformat", "nbclient", "click", "html"}
FRONT_DOORS = {"cli.py", "pytest_plugin.py"}  # they drive click/pytest and hand records to render/


def imported(path):
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_rendering_code_outside_render():
    offenders = {p.name: sorted(imported(p) & RENDERERS) for p in SRC.glob("*.py")
                 if p.name not in FRONT_DOORS and imported(p) & RENDERERS}
    assert offenders == {}


def test_the_judge_evaluates_nothing():
    # pure functions: the judge imports neither the evaluation substrate nor the channels, and never
    # calls autograd (it only compares values it is given)
    tree = ast.parse((SRC / "judge.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not modules & {"evaluate", "channels", "full", "directional", "api", "run"}
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not any("autograd" in c or "backward" in c for c in calls)

"""Build a notebook that teaches PyTorch's gradients (nbformat) from built-in suites or ledger files, and
execute it (nbclient).

Per check: the derivation in markdown, written first; then the plain torch code a learner would write —
``backward()`` and ``.grad`` (stored), ``torch.autograd.grad`` (returned), and the central difference
``(f(x + h) - f(x - h)) / (2 * h)`` written out (estimated) — generated from the ledger's expression and
inputs; then gradaudit's comparison table for the same check. A check whose function is Python code
(the autograd lesson's probes) keeps the gradaudit call only.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import html
import keyword
import pprint
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import GradauditError
from ..record import Record

#: the documents behind the built-in suites, by the names readers know them by
DOCUMENTS = {"quickstart": "the quickstart", "tutorial": "the gradient-check tutorial",
             "notebook": "the gradient-check tutorial", "lesson": "the autograd lesson"}
_BY_NUMBER = {"0": "the quickstart", "1": "the gradient-check tutorial", "4": "the autograd lesson"}
_SEED = re.compile(r"\b[Ss]eed[ -]?00([014])\b(?:\s*\((?:quickstart|notebook|tutorial|lesson)\))?")


def plain_names(text: str) -> str:
    """*text* with the course documents called by their names ("the quickstart", "the gradient-check
    tutorial", "the autograd lesson"), never by a seed number."""
    return _SEED.sub(lambda m: _BY_NUMBER[m.group(1)], text)


INTRO = """# Gradients you can check by hand, in PyTorch

Every analytical derivative below is **written before any code runs**. Then each check is done three
ways, in plain PyTorch you can copy into your own code:

- **stored**: what `y.backward()` leaves in `x.grad` (fresh leaves, `.grad` is `None` before);
- **returned**: what `torch.autograd.grad(y, (x,))` gives back (and `.grad` stays `None`);
- **estimated**: a central finite difference in float64, `(f(x + h) - f(x - h)) / (2 * h)`.

After the code, gradaudit runs the same check and puts the written expectation beside each observation,
with shape, dtype and device beside every value and the tolerance with its reason. A check written to
fail is kept intact — code, environment, discrepancy — instead of loosening a tolerance until it turns
green.

Built by `gradaudit notebook` from {sources}."""

SETUP = """import math

import torch

torch.__version__"""


# -- torch code from a ledger expression ---------------------------------------------------------

#: helper names the generated cells use; an input with one of these names is renamed in the code
_USED = frozenset({"torch", "math", "f", "h", "e", "i", "eps", "slopes", "exc", "outcome", "grads", "max", "abs",
                   "range", "type", "gn"})  # (gn: gradaudit.notebook, whose cells show each record)
_SPECIAL = {"softplus": "torch.nn.functional.softplus"}
_TWO_ARGS = {"pow", "maximum", "minimum", "dot", "matmul"}


def _tensor_args(name: str) -> int:
    from .. import expr as _expr

    table = getattr(_expr, "TENSOR_ARGS", None) or {}
    return int(table.get(name, 2 if name in _TWO_ARGS else 1))


def variable_names(names: Sequence[str], taken: Sequence[str] = ()) -> dict[str, str]:
    """A Python variable per input name: the name itself unless the generated code needs it (torch, f, h,
    max, ...); then the name with underscores appended."""
    out: dict[str, str] = {}
    used = set(_USED) | set(taken)
    for n in names:
        v = n
        while v in used or keyword.iskeyword(v):
            v += "_"
        out[n] = v
        used.add(v)
    return out


class _ToTorch(ast.NodeTransformer):
    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=self.names[node.id], ctx=ast.Load()), node)
        if node.id == "pi":
            return ast.copy_location(ast.parse("math.pi", mode="eval").body, node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        assert isinstance(node.func, ast.Name)  # the expression language calls named functions only
        name = node.func.id
        k = _tensor_args(name)
        tensors = [self._tensor(a) for a in node.args[:k]]
        params = node.args[k:]
        keywords = list(node.keywords)
        if name == "logsumexp" and not params and not any(kw.arg == "dim" for kw in keywords):
            # over every element, as gradaudit reads logsumexp(x): torch.logsumexp needs a dim
            flat = ast.Call(func=ast.Attribute(value=tensors[0], attr="reshape", ctx=ast.Load()),
                            args=[ast.Constant(-1)], keywords=[])
            tensors, params = [flat], [ast.Constant(0)]
        func = ast.parse(_SPECIAL.get(name, f"torch.{name}"), mode="eval").body
        return ast.copy_location(ast.Call(func=func, args=tensors + params, keywords=keywords), node)

    def _tensor(self, node: ast.expr) -> ast.expr:
        """A tensor argument: the translated expression, or a constant made a float64 tensor (as gradaudit
        evaluates it; torch.maximum(x, 0) would refuse the plain number)."""
        has_input = any(isinstance(n, ast.Name) and n.id in self.names for n in ast.walk(node))
        new = self.visit(node)
        if has_input:
            return new
        return ast.Call(func=ast.parse("torch.tensor", mode="eval").body, args=[new],
                        keywords=[ast.keyword(arg="dtype", value=ast.parse("torch.float64", mode="eval").body)])


def torch_expression(expr: Any, names: Mapping[str, str]) -> str:
    """The torch code of a parsed ledger expression (``gradaudit.expr.Expr``): ``sum(x*x)`` ->
    ``torch.sum(x * x)``, ``softplus`` -> ``torch.nn.functional.softplus``, ``pi`` -> ``math.pi``."""
    tree = _ToTorch(names).visit(copy.deepcopy(expr.tree))
    return ast.unparse(ast.fix_missing_locations(tree))


def _literal(value: Any, dtype: str) -> str:
    """A value as Python source; whole numbers written as floats for a floating dtype (3 -> 3.0)."""
    floating = dtype in ("float64", "float32", "float16", "bfloat16")

    def conv(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if floating and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        return v

    return repr(conv(value))


def _tensor_line(var: str, spec: Any, *, grad: bool, dtype: str | None = None) -> str:
    args = [_literal(spec.written(), dtype or spec.dtype), f"dtype=torch.{dtype or spec.dtype}"]
    if spec.device != "cpu":
        args.append(f"device={spec.device!r}")
    if grad:
        args.append("requires_grad=True")
    return f"{var} = torch.tensor({', '.join(args)})"


def _output_name(names: Mapping[str, str]) -> str:
    out = "y"
    while out in names.values() or out in _USED:
        out += "_"
    return out


def _grad_names(check: Any, names: Mapping[str, str], prefix: str = "d") -> dict[str, str]:
    taken = set(names.values()) | _USED
    out = {}
    for n in check.grad_inputs:
        v = f"{prefix}{names[n]}"
        while v in taken:
            v += "_"
        taken.add(v)
        out[n] = v
    return out


def backward_code(check: Any) -> str:
    """The cell of the stored channel: fresh leaves, the check's protocol step by step, then ``.grad``."""
    names = variable_names(list(check.inputs))
    y = _output_name(names)
    expr = torch_expression(check.function, names)
    steps = {"forward": f"{y} = {expr}", "backward": f"{y}.backward()",
             "backward_retain": f"{y}.backward(retain_graph=True)"}
    lines = [f"# stored: backward() adds the gradient into each leaf's .grad (protocol: {' → '.join(check.protocol)})"]
    lines += [_tensor_line(names[n], s, grad=s.requires_grad) for n, s in check.inputs.items()]
    body: list[str] = []
    for step in check.protocol:
        if step in steps:
            body.append(steps[step])
        elif step == "reset_none":
            body += [f"{names[n]}.grad = None  # discard what was accumulated" for n in check.grad_inputs]
        elif step == "reset_zero":
            body += [f"{names[n]}.grad.zero_()  # zero it in place" for n in check.grad_inputs]
    grads = ", ".join(f"{names[n]}.grad" for n in check.grad_inputs)
    err = check.expect_error
    if err is None:
        return "\n".join(lines + body + [grads or "None"])
    lines.append("try:")
    lines += ["    " + line for line in body]
    lines.append("    outcome = 'no error'")
    lines.append(f"except Exception as exc:  # expected: {err.type} matching {err.match!r}")
    lines.append("    outcome = f'{type(exc).__name__}: {exc}'")
    lines.append("outcome")
    return "\n".join(lines)


def autograd_code(check: Any) -> str:
    """The cell of the returned channel: one fresh forward, ``torch.autograd.grad``, ``.grad`` still None."""
    names = variable_names(list(check.inputs))
    y = _output_name(names)
    grads = _grad_names(check, names)
    wrt = [names[n] for n in check.grad_inputs]
    lines = ["# returned: torch.autograd.grad gives the gradient back and stores nothing in .grad"]
    lines += [_tensor_line(names[n], s, grad=s.requires_grad) for n, s in check.inputs.items()]
    lines.append(f"{y} = {torch_expression(check.function, names)}")
    if len(wrt) == 1:
        lines.append(f"({grads[check.grad_inputs[0]]},) = torch.autograd.grad({y}, ({wrt[0]},))")
    else:
        targets = ", ".join(grads[n] for n in check.grad_inputs)
        lines.append(f"{targets} = torch.autograd.grad({y}, ({', '.join(wrt)}))")
    shown = [grads[n] for n in check.grad_inputs] + [f"{names[n]}.grad" for n in check.grad_inputs]
    lines.append(", ".join(shown) + "  # returned, then .grad (still None)")
    return "\n".join(lines)


def finite_difference_code(check: Any) -> str:
    """The cell of the estimated channel: the difference quotient written out, in float64, element by
    element; the check's chosen step, else h = cbrt(eps)·max(1, |x|)."""
    names = variable_names(list(check.inputs))
    params = ", ".join(names[n] for n in check.inputs)
    scheme = check.numeric_scheme
    quotient = {"forward": "(f({plus}) - f({same})) / h", "backward": "(f({same}) - f({minus})) / h"}.get(
        scheme, "(f({plus}) - f({minus})) / (2 * h)")
    what = {"forward": "a forward difference", "backward": "a backward difference"}.get(scheme,
                                                                                         "a central difference")
    note = "" if scheme in ("central", "forward", "backward") else \
        f" (gradaudit's own evidence uses {'Ridders extrapolation' if scheme == 'ridders' else scheme}, " \
        "more accurate, with an error bound)"
    root = "** (1 / 2)" if scheme in ("forward", "backward") else "** (1 / 3)"
    lines = [f"# estimated: {what} in float64{note}",
             f"def f({params}):", f"    return {torch_expression(check.function, names)}", ""]
    lines += [_tensor_line(names[n], s, grad=False, dtype="float64" if s.requires_grad else None)
              for n, s in check.inputs.items()]
    if check.step is not None:
        lines.append(f"h = {check.step!r}  # the step the check chose")
    else:
        rule = "sqrt" if scheme in ("forward", "backward") else "cbrt"
        lines.append(f"eps = torch.finfo(torch.float64).eps  # the step: h = {rule}(eps)·max(1, |x|)")
    grads = _grad_names(check, names)
    results = []
    for n in check.grad_inputs:
        spec = check.inputs[n]
        x = names[n]
        scalar = len(spec.shape) == 0

        def call(arg: str, x: str = x, n: str = n) -> str:
            return ", ".join(arg if m == n else names[m] for m in check.inputs)

        if scalar:
            if check.step is None:
                lines.append(f"h = eps {root} * max(1.0, abs({x}.item()))")
            text = quotient.format(plus=call(f"{x} + h"), minus=call(f"{x} - h"), same=call(x))
            results.append(text if len(check.grad_inputs) == 1 else grads[n])
            if len(check.grad_inputs) > 1:
                lines.append(f"{grads[n]} = {text}")
            continue
        text = quotient.format(plus=call(f"{x} + h * e"), minus=call(f"{x} - h * e"), same=call(x))
        lines += ["slopes = []", f"for i in range({x}.numel()):",
                  f"    e = torch.zeros_like({x})", "    e.view(-1)[i] = 1.0  # the unit vector along element i"]
        if check.step is None:
            lines.append(f"    h = eps {root} * max(1.0, abs({x}.view(-1)[i].item()))")
        lines += [f"    slopes.append({text})", f"{grads[n]} = torch.stack(slopes).reshape({x}.shape)"]
        results.append(grads[n])
    lines.append(", ".join(results))
    return "\n".join(lines)


def _teaches(check: Any) -> bool:
    """Whether the check's function is a ledger expression, so that torch code can be written for it."""
    from ..expr import Expr

    return isinstance(getattr(check, "function", None), Expr)


# -- the notebook ----------------------------------------------------------------------------------

@dataclass
class _Source:
    label: str  # what the reader is told: "the quickstart", "the ledger `my.json`"
    heading: str
    checks: list[Any]
    call: Any  # check index -> the code of the cell that shows gradaudit's comparison


def _builtin(name: str) -> _Source:
    from .. import suites

    checks = suites.load(name)
    document = DOCUMENTS.get(name, f"the built-in suite `{name}`")
    blurb = plain_names(suites.BUILTIN[suites.canonical(name)][1])
    if blurb.lower().startswith(document + ":"):  # "the quickstart: x*x at x=3, ..." under its own heading
        blurb = blurb[len(document) + 1:].strip()
    blurb = md(blurb[:1].upper() + blurb[1:])
    heading = f"## {document[0].upper()}{document[1:]} (built-in suite `{name}`)\n\n{blurb}"
    return _Source(label=f"{document} (built-in suite `{name}`)", heading=heading, checks=list(checks),
                   call=lambda i: f"gn.show({name!r}, {checks[i].name!r})")


def _ledger(path: str | Path) -> _Source:
    """A ledger file's checks, each with its record as written (file defaults folded in), for the cell that
    re-runs it: the notebook holds the data, so it runs wherever it is opened."""
    from ..ledger import FILE_KEYS, parse_text, read_ledger

    p = Path(path)
    checks = read_ledger(p)
    data = parse_text(p.read_text(encoding="utf-8"), p.suffix.lower(), where=str(path))
    defaults: dict[str, Any] = {}
    if isinstance(data, Mapping) and "checks" in data:
        defaults = {k: data[k] for k in ("dtype", "device") if k in data and k in FILE_KEYS}
        data = data["checks"]
    raw = [data] if isinstance(data, Mapping) else list(data)
    records = []
    for check, rec in zip(checks, raw):
        one = {"name": check.name, **{k: v for k, v in defaults.items() if k not in rec},
               **{k: v for k, v in rec.items() if k != "name"}, "source": check.source}
        records.append(one)
    shown = clean_text(p.name).replace("`", "'")

    def call(i: int) -> str:
        return "gn.show_record(" + pprint.pformat(records[i], width=100, sort_dicts=False) + ")"

    return _Source(label=f"the ledger `{shown}`", heading=f"## The ledger `{shown}`\n\n{len(checks)} "
                   f"check{'s' if len(checks) != 1 else ''}, each with its derivation first.", checks=checks,
                   call=call)


def clean_text(text: Any) -> str:
    from .common import clean

    return clean(text, newlines=False)


_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|])")


def md(text: Any) -> str:
    """Text from a ledger for markdown: control characters escaped, markdown's own characters taken literally."""
    return _MARKDOWN.sub(r"\\\1", clean_text(text))


def _code(value: Any) -> str:
    return "`" + clean_text(value).replace("`", "'") + "`"


def _expected_text(check: Any) -> str:
    from ..run import written as _written
    from ..spec import Matches, Probe

    if isinstance(check, Probe):
        return "; ".join(f"{md(fact)}: " + (f"matches {_code('/' + v.pattern + '/')}" if isinstance(v, Matches)
                                            else _code(_written(v))) for fact, v in check.expected.items())
    err = getattr(check, "expect_error", None)
    if err is not None:
        why = f" — {md(err.explanation)}" if err.explanation else ""
        return f"a {_code(err.type)} matching {_code(err.match)}{why}"
    expected = getattr(check, "expected", {})
    return ", ".join(f"d/d{md(k)} = {_code(_written(v))}" for k, v in expected.items()) or "—"


def _check_cells(source: _Source, i: int) -> list[Any]:
    from nbformat.v4 import new_code_cell, new_markdown_cell

    check = source.checks[i]
    derivation = plain_names(md(check.derivation or "—"))
    lines = [f"### {md(check.name)}", "", f"*Source:* {plain_names(md(check.source or '—'))}", "",
             f"**Derivation, written first:** {derivation}", "", f"**Expected:** {_expected_text(check)}"]
    if getattr(check, "expect", "pass") == "fail":
        lines += ["", f"**Deliberately failing, kept visible:** {plain_names(md(check.expect_why))}"]
    cells = [new_markdown_cell("\n".join(lines))]
    if _teaches(check):
        methods = tuple(check.methods)
        if "backward" in methods:
            cells.append(new_code_cell(backward_code(check), metadata={"gradaudit": {"channel": "stored"}}))
        if check.expect_error is None and "autograd.grad" in methods:
            cells.append(new_code_cell(autograd_code(check), metadata={"gradaudit": {"channel": "returned"}}))
        if check.expect_error is None and "finite_difference" in methods:
            cells.append(new_code_cell(finite_difference_code(check), metadata={"gradaudit": {"channel": "estimated"}}))
        channels = ", ".join(m for m in methods if m != "taylor") or "its methods"
        cells.append(new_markdown_cell(
            f"**Derivation, written first:** {_expected_text(check)}. gradaudit now runs the same check "
            f"({channels}) and puts the expectation beside each observation, with the tolerance and its reason:"))
    cells.append(new_code_cell(source.call(i)))
    return cells


def build(suites_: Sequence[str] = ("notebook",), ledgers: Sequence[str | Path] = ()) -> Any:
    """The notebook: environment first, then per check its derivation, the torch code of each channel
    (for ledger expressions), and gradaudit's comparison. *ledgers*: the user's ledger files."""
    try:
        import nbformat
        from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
    except ImportError:
        raise GradauditError("notebooks need nbformat: pip install nbformat nbclient ipykernel "
                             "(in a clone of gradaudit: pip install -e '.[notebook]').") from None

    sources = [_ledger(p) for p in ledgers] + [_builtin(s) for s in suites_]
    labels = [s.label for s in sources]
    joined = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    cells = [new_markdown_cell(INTRO.format(sources=joined)),
             new_markdown_cell("## Environment\n\nRecorded before any check: Python, torch and each "
                               "accelerator's readiness (installation is not readiness)."),
             new_code_cell("import gradaudit.notebook as gn\n\ngn.environment()"),
             new_markdown_cell("## PyTorch\n\nEvery code cell below is plain PyTorch: a fresh leaf tensor "
                               "(`requires_grad=True`) per input, the function, then the gradient."),
             new_code_cell(SETUP)]
    for source in sources:
        cells.append(new_markdown_cell(source.heading))
        for i in range(len(source.checks)):
            cells += _check_cells(source, i)
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    nbformat.validate(nb)
    return nb


#: the kernel's environment: no debugger file-validation warning ("frozen modules") on stderr
KERNEL_ENV = {"PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def execute(nb: Any, *, timeout: int = 600, cwd: str | Path | None = None) -> Any:
    """Run every cell offline with nbclient (kernel python3) and keep the outputs.

    The kernel runs over CurveZMQ-encrypted TCP where pyzmq and the kernel support it (so ipykernel has
    no "running over TCP without encryption" warning to print), with the debugger's frozen-modules check
    off (:data:`KERNEL_ENV`)."""
    import asyncio
    import os
    import tempfile

    try:
        from nbclient import NotebookClient
    except ImportError:
        raise GradauditError("executing notebooks needs nbclient and ipykernel: "
                             "pip install nbformat nbclient ipykernel "
                             "(in a clone of gradaudit: pip install -e '.[notebook]').") from None
    kwargs: dict[str, Any] = {}
    config = _kernel_config()
    if config is not None:
        kwargs["config"] = config
    # a torch cell may raise as the check's function does at its point (gradaudit's table then shows the
    # error verdict): kept, as the learner's own code would show it; any other cell raising is a failure
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd or Path.cwd())}}, **kwargs)
    # the kernel's own log goes to a file, shown where the execution fails: an interrupted kernel logged a ZMQError
    # traceback to the terminal beside the one-line "interrupted"
    with _interrupts() as interrupted, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        try:
            client.execute(env={**os.environ, **KERNEL_ENV}, stderr=log)
        except (Exception, asyncio.CancelledError):
            # Ctrl-C, which nbclient's shutdown of the kernel turns into ZMQError, DeadKernelError, AssertionError, a
            # cancelled wait for the kernel (a BaseException) ...:
            # seen by the handler here before the kernel runs, by nbclient's own (its event loop's, which replaces
            # it while cells run, and leaves the kernel's cleanup behind) after
            if interrupted or getattr(client, "_async_cleanup_kernel_future", None) is not None:
                raise KeyboardInterrupt from None
            log.seek(0)
            sys.stderr.write(log.read())
            raise
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cell.get("metadata", {}).get("gradaudit", {}).get("channel"):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = (cell.source.splitlines() or ["?"])[0]
                raise GradauditError(f"executing the notebook failed in cell {i} ({first} ...): "
                                     f"{out.get('ename')}: {out.get('evalue')}. Write it without --execute to "
                                     "inspect it.")
    return nb


@contextlib.contextmanager
def _interrupts() -> Iterator[list[bool]]:
    """A list that holds True once SIGINT arrived (which still raises KeyboardInterrupt); in the main thread only."""
    import signal
    import threading

    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        seen.append(True)
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _kernel_config() -> Any:
    """Transport encryption for the kernel's sockets, where this jupyter_client and pyzmq offer it."""
    try:
        import zmq
        from jupyter_client import KernelManager
        from traitlets.config import Config
    except ImportError:  # pragma: no cover - nbclient depends on all three
        return None
    if "transport_encryption" not in KernelManager.class_trait_names() or not zmq.has("curve"):
        return None
    return Config({"KernelManager": {"transport_encryption": "auto"}})


def write(nb: Any, path: str | Path) -> None:
    import nbformat

    from ..ledger import write_atomic

    write_atomic(path, nbformat.writes(nb))


# -- what the notebook's cells call (through gradaudit.notebook) ------------------------------------

NB_COLUMNS = ("method", "stored/returned", "expected", "observed", "abs err", "tolerance", "shape", "dtype",
              "device", "verdict")

_ENV: dict[str, Any] = {}


def environment() -> EnvironmentView:
    """The environment block (computed once per kernel), shown at the top of the notebook."""
    from ..env import environment as block

    if not _ENV:
        _ENV.update(block())
    return EnvironmentView(dict(_ENV))


@dataclass
class EnvironmentView:
    block: dict[str, Any]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .facts import environment_lines

        lines = environment_lines(self.block)
        return {"text/plain": "\n".join(lines),
                "text/html": "<pre>" + html.escape("\n".join(lines)) + "</pre>"}


@dataclass
class CheckView:
    """One check's records, rendered as a table (and the intact account of any failure)."""

    records: list[Record]

    def rows(self) -> list[list[str]]:
        from .text import row

        return [row(r)[2:] + [row(r)[0]] for r in self.records]  # verdict last, check name dropped

    def text(self) -> str:
        from .text import detail_lines, needs_detail

        widths = [max(len(h), *(len(c[i]) for c in self.rows())) for i, h in enumerate(NB_COLUMNS)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(NB_COLUMNS, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)) for cells in self.rows()]
        for r in self.records:
            if needs_detail(r):
                lines += [""] + detail_lines(r)
        return plain_names("\n".join(lines))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .text import detail_lines, needs_detail

        head = "".join(f"<th>{html.escape(h)}</th>" for h in NB_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in self.rows())
        extra = "".join("<pre>" + html.escape(plain_names("\n".join(detail_lines(r)))) + "</pre>"
                        for r in self.records if needs_detail(r))
        return {"text/plain": self.text(),
                "text/html": f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{extra}"}


def show(suite: str, check: str) -> CheckView:
    """Run one check of a built-in suite and return its view (the records are kept on it)."""
    from .. import suites
    from ..run import run

    found = [c for c in suites.load(suite) if c.name == check]
    if not found:
        raise KeyError(f"no check named {check!r} in suite {suite!r}")
    return CheckView(run(found, environment_id=environment().block["id"]))


def show_record(record: Mapping[str, Any]) -> CheckView:
    """Run one ledger record (the data a ledger file holds for one check) and return its view."""
    from ..ledger import parse_ledger
    from ..run import run

    return CheckView(run(parse_ledger(dict(record), where="this notebook"),
                         environment_id=environment().block["id"]))

"""The ``gradaudit`` command line: run, plan, report, notebook, steps, env.

Exit codes: 0 every check passed, 1 a check failed or errored (or was inconclusive), 2 usage or input
error, 5 no check ran, 130 interrupted. A reader that closes standard output early changes none of them.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from .errors import EXIT_CHECK_FAILED, EXIT_NO_CHECKS, EXIT_USAGE, GradauditError, SpecError
from .render.common import clean, plural
from .run import DEFAULT_MAX_ELEMENTS
from .run import plan as plan_checks
from .run import run as run_checks


def _short(text: str, n: int = 60) -> str:
    return clean(text if len(text) <= n else text[: n - 1] + "…", newlines=False)


def _load_targets(targets: tuple[str, ...]) -> list[tuple[str, list[Any]]]:
    """Resolve each target to (label, checks): a ledger file if it exists, else a built-in suite."""
    from . import suites
    from .expr import _suggest
    from .ledger import read_ledger

    def exists(target: str) -> bool:
        try:
            return Path(target).exists()
        except OSError as exc:  # a name too long for the file system (ENAMETOOLONG raised, a bare traceback)
            raise SpecError(f"'{_short(target)}' is not a usable path ({exc.strerror}); give a ledger file's path or "
                            f"a built-in suite: {', '.join(suites.names())}.") from None

    out: list[tuple[str, list[Any]]] = []
    for target in targets or tuple(suites.names()):
        if exists(target) or target.endswith((".json", ".toml")):
            out.append((target, read_ledger(target)))
        elif suites.known(target):
            out.append((target, suites.load(target)))
        else:
            hint = _suggest(target, suites.names())
            raise SpecError(f"'{target}' is neither a ledger file nor a built-in suite.{hint} "
                            f"Built-in suites: {', '.join(suites.names())}; a ledger is a .json or .toml file.")
    return out


def _select(loaded: list[tuple[str, list[Any]]], pattern: str | None) -> list[tuple[str, list[Any]]]:
    if not pattern:
        return loaded
    chosen = [(label, [c for c in checks if pattern.lower() in c.name.lower()]) for label, checks in loaded]
    chosen = [(label, checks) for label, checks in chosen if checks]
    if not chosen:
        names = sorted(c.name for _, checks in loaded for c in checks)
        raise SpecError(f"no check name contains '{pattern}'. Checks: {'; '.join(names)}.")
    return chosen


def _repro(label: str, name: str) -> str:
    """The command that runs this check again. A name holding control characters is shown escaped, and the escaped
    text pasted back selected nothing: its longest printable part is the filter then (--check matches a part)."""
    import re

    if not name.isprintable():
        parts = [p for p in re.split(r"[^\S ]|[\x00-\x1f\x7f-\x9f]", name) if p.isprintable() and p.strip()]
        name = max(parts, key=len) if parts else name
    return f"gradaudit run {shlex.quote(label)} --check {shlex.quote(name)}"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gradaudit")
def cli() -> None:
    """Verify PyTorch gradients against expectations written first.

    Each check compares an analytical gradient with what backward() stores in .grad,
    what torch.autograd.grad returns, and what finite differences (float64) estimate.
    """


def _report_options(f: Any) -> Any:
    for option in reversed((
        click.option("--html", "html_path", type=click.Path(dir_okay=False),
                     help="Write a self-contained HTML report (atomically; missing folders are created)."),
        click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
                     help="Write JUnit XML (atomically; missing folders are created)."),
        click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False),
                     help="Write a Markdown summary table (atomically; missing folders are created)."),
    )):
        f = option(f)
    return f


def _distinct_outputs(reading: tuple[str, ...] = (), **paths: str | None) -> None:
    """Each report its own file, each of them a regular file (or new), none of them a ledger being read (*reading*:
    the targets that are files; `run mine.json --json mine.json` replaced the ledger with its results): checked before
    any work."""
    import os

    from .ledger import check_target

    seen: dict[str, str] = {os.path.realpath(t): f"the ledger {t}" for t in reading if os.path.isfile(t)}
    for option, path in paths.items():
        if path is None:
            continue
        name = "RESULTS" if option == "results" else f"--{option}"  # the positional argument has no option name
        if not path:  # (--json '' was ignored without a word: no results file, exit 0)
            example = {"json": "results.jsonl", "html": "report.html", "junit": "results.xml", "markdown": "summary.md",
                       "output": "gradcheck.ipynb"}.get(option, "results.jsonl" if option == "results" else "v.png")
            raise SpecError(f"{name} was given an empty path; give the path of a file, such as {example}"
                            + (", or leave the option out." if option not in ("results", "output") else "."))
        check_target(path, reading=option == "results")  # (RESULTS is read: "cannot write results" said of it)
        real = os.path.realpath(path)
        if real in seen:
            raise SpecError(f"{seen[real]} and {name} name the same file ({path}); one would overwrite "
                            "the other. Give each report its own path.")
        seen[real] = name


#: the results files this command has written so far (what an interrupt message says)
_WRITTEN: list[str] = []
#: the Ctrl-C handler in place before the command finished writing (main() puts it back for a caller in this process)
_SIGINT_BEFORE: list[Any] = []
#: main() was called as the program (no argv): only then is Ctrl-C ignored once the last file is written
_PROGRAM = False


def _finished() -> None:
    """The command has written every file it was asked for: it is done, and a Ctrl-C from now on is ignored, so the
    exit code stays its own. One that landed during the last lines, or during Python's shutdown (whose default
    action killed the process, exit 130 with no message, the files already replaced), said "interrupted", which
    means nothing was written."""
    import signal
    import threading

    # only as the program itself (main() without argv), and only over Python's own handler: a caller's process (click's
    # CliRunner, IPython's %run -m gradaudit, which has a handler of its own) keeps its Ctrl-C
    if (_PROGRAM and threading.current_thread() is threading.main_thread() and not _SIGINT_BEFORE
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        _SIGINT_BEFORE.append(signal.signal(signal.SIGINT, signal.SIG_IGN))


def _restore_sigint() -> None:
    import signal

    if _SIGINT_BEFORE:
        before = _SIGINT_BEFORE.pop()
        if before is not None:  # (None: a handler not set from Python, which cannot be put back)
            signal.signal(signal.SIGINT, before)


def _render_reports(records: list[Any], header: dict[str, Any], html_path: str | None, junit_path: str | None,
                    markdown_path: str | None) -> list[tuple[str, str, str]]:
    """Each requested report as (path, text, what to say once written), rendered before any is written."""
    out = []
    if html_path:
        from .render.html import render_html

        out.append((html_path, render_html(records, header), f"html: {html_path}"))
    if junit_path:
        from .render.junit import junit_xml

        out.append((junit_path, junit_xml(records, header), f"junit: {junit_path}"))
    if markdown_path:
        from .render.markdown import markdown

        out.append((markdown_path, markdown(records, header), f"markdown: {markdown_path}"))
    return out


def _write_all(outputs: list[tuple[str, str, str]]) -> list[str]:
    """Write every rendered file (each atomically), all of them rendered first: an interrupt while the slow
    reports (HTML plots) were rendered replaced the JSON records and left the older HTML beside them, the
    message saying nothing was written. Returns what was written."""
    from .ledger import write_atomic

    written = []
    for path, text, said in outputs:
        write_atomic(path, text)
        _WRITTEN.append(path)
        written.append(said)
    return written


def _for_terminal(json_text: str) -> str:
    """JSON for standard output with the characters JSON leaves raw that a terminal acts on (DEL, C1 controls such as
    the 8-bit CSI, bidi overrides) written as JSON escapes: the same values read back, none reaches the terminal
    raw (`gradaudit plan` printed a check name's U+009B and U+202E as they were)."""
    from .render.common import _CONTROL

    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


class LazyProgress:
    """A rich progress bar that appears only on a terminal, and only once a run passes one second."""

    def __init__(self, console: Any, total: int, *, after_s: float = 1.0):
        import time

        self.console, self.total, self.after_s = console, total, after_s
        self.start, self.done = time.perf_counter(), 0
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, check: Any) -> None:
        import time

        self.done += 1
        if not self.console.is_terminal:
            return
        if self.bar is None and time.perf_counter() - self.start > self.after_s and self.done < self.total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}"), console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.total, completed=self.done)
        if self.bar is not None:
            from rich.markup import escape

            # a check's name is user text: its control characters escaped, and no rich markup read in it (a
            # [link=...] became a live hyperlink, an ESC sequence cleared the screen)
            self.bar.update(self.task, completed=self.done, description=escape(clean(getattr(check, "name", ""),
                                                                                    newlines=False)))

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


MIN_WIDTH = 40  # narrower, and the table has no room for its columns


@cli.command()
@click.argument("targets", nargs=-1)
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write records as JSON Lines (atomically; missing folders are created).")
@_report_options
@click.option("--check", "pattern", help="Run only checks whose name contains this text.")
@click.option("--list", "list_only", is_flag=True, help="List the checks without running them.")
@click.option("--width", type=click.IntRange(min=MIN_WIDTH), default=None,
              help=f"Table width, at least {MIN_WIDTH} (default: the terminal's).")
@click.option("-q", "--quiet", is_flag=True,
              help="Show only what makes the run fail (failures, errors, inconclusive checks) and the summary line.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds each check may take (a check's own 'timeout' key wins); on expiry the check "
                   "gets the error verdict and the run goes on.")
@click.option("--max-elements", type=click.IntRange(min=1), default=DEFAULT_MAX_ELEMENTS, show_default=True,
              help="Refuse, before any work, a check with more elements to differentiate (finite differences "
                   "cost about 12 evaluations per element).")
def run(targets: tuple[str, ...], json_path: str | None, html_path: str | None, junit_path: str | None,
        markdown_path: str | None, pattern: str | None, list_only: bool, width: int | None, quiet: bool,
        timeout: float | None, max_elements: int) -> None:
    """Run the checks of built-in SUITES or ledger FILES (default: every built-in suite)."""
    from .env import environment
    from .ledger import results_text
    from .record import summarize
    from .render.facts import environment_lines
    from .render.text import make_console, render
    from .run import size_guard

    if list_only:  # (--list --json P wrote nothing and said nothing)
        given = [f"--{n}" for n, v in (("json", json_path), ("html", html_path), ("junit", junit_path),
                                       ("markdown", markdown_path)) if v is not None]
        if given:
            raise SpecError(f"--list lists the checks without running them, so there are no results for "
                            f"{' and '.join(given)} to write; leave {'them' if len(given) > 1 else 'it'} out, or drop "
                            "--list to run the checks.")
    _distinct_outputs(targets, json=json_path, html=html_path, junit=junit_path, markdown=markdown_path)
    loaded = _select(_load_targets(targets), pattern)
    console = make_console(width=width)
    if list_only:
        for label, checks in loaded:
            console.print(f"{clean(label, newlines=False)}:", highlight=False, markup=False)
            for c in checks:
                how = ", ".join(getattr(c, "methods", ())) or f"observation of {plural(len(c.expected), 'fact')}"
                console.print(clean(f"  {c.name} — {how} — {c.source}", newlines=False), highlight=False, markup=False)
        return
    for label, checks in loaded:
        try:
            size_guard(checks, max_elements)
        except SpecError as exc:
            raise SpecError(exc.bare_message.replace("--max-elements N, or ga.run(..., max_elements=N)",
                                                     "--max-elements N"), where=label) from None
    env = environment()
    records = []
    progress = LazyProgress(console, sum(len(checks) for _, checks in loaded))
    try:
        for label, checks in loaded:
            # each record carries its re-run command (gradaudit report and the HTML show it as run does), made per
            # target: two ledgers with one check name each got the last one's (a failure in A.json said to re-run
            # B.json, which passes)
            records += [r if r.rerun else dataclasses.replace(r, rerun=_repro(label, r.check))
                        for r in run_checks(checks, environment_id=env["id"], progress=progress, timeout=timeout,
                                            max_elements=None)]
    except KeyboardInterrupt:
        progress.stop()
        click.echo(f"interrupted after {len(records)} records; nothing was written"
                   + (f" and {json_path} is untouched" if json_path else "") + ".", err=True)
        sys.exit(130)
    progress.stop()
    counts = summarize(records)
    header = {"environment": env, "targets": [label for label, _ in loaded], "summary": counts}
    render(records, console, environment_lines=() if quiet else environment_lines(env), quiet=quiet)
    # after the table: a file that cannot be written does not hide the results
    outputs = [(json_path, results_text(records, header), f"records: {json_path}")] if json_path else []
    written = _write_all(outputs + _render_reports(records, header, html_path, junit_path, markdown_path))
    _finished()
    for line in written:
        console.print(clean(line), highlight=False, markup=False)
    _exit_as_run(records, counts)


def _exit_as_run(records: list[Any], counts: Any, results: str | None = None, planned: bool = False) -> None:
    """The run's exit code (shared by `report`, which exits as the run did): 5 where no check ran, as pytest's
    "no tests" (report exited 0 there, and a CI step that re-rendered results went green), 1 where one failed. A
    plan's records (`plan --json`, *planned*) ran nothing by design: `plan` exits 0, and so does their report."""
    from .record import run_failed

    if not planned and not any(r.executed and r.verdict != "skipped" for r in records):
        where = f" in {clean(results, newlines=False)}" if results else ""
        click.echo(f"gradaudit: no checks ran{where}: every record was skipped or nothing needs a gradient "
                   "(as pytest, exit 5).", err=True)
        sys.exit(EXIT_NO_CHECKS)
    if run_failed(counts):
        sys.exit(EXIT_CHECK_FAILED)


@cli.command()
@click.argument("results", type=click.Path(dir_okay=False))
@_report_options
@click.option("-q", "--quiet", is_flag=True,
              help="Terminal report: only what makes the run fail, and the summary line.")
def report(results: str, html_path: str | None, junit_path: str | None, markdown_path: str | None,
           quiet: bool) -> None:
    """Re-render saved RESULTS (from run --json or ga.write_results) without recomputing: as HTML, JUnit or
    Markdown files, or, with none of those, as the terminal report. The exit code is the run's either way (1 where
    a check failed or was inconclusive, 5 where none ran), so a CI step that re-renders results fails as the run
    did."""
    from .ledger import read_results
    from .record import summarize

    _distinct_outputs(results=results, html=html_path, junit=junit_path, markdown=markdown_path)
    header, records = read_results(results)
    if not records:
        raise SpecError("holds no records; write one with gradaudit run ... --json PATH.", where=results)
    if not (html_path or junit_path or markdown_path):
        from .render.facts import environment_lines
        from .render.text import make_console, render

        env = header.get("environment") or {}
        render(records, make_console(), quiet=quiet, environment_lines=() if quiet or not env
               else environment_lines(env))
        _exit_as_run(records, summarize(records), results, planned=header.get("planned") is True)
        return
    written = _write_all(_render_reports(records, header, html_path, junit_path, markdown_path))
    _finished()
    for line in written:
        click.echo(line)
    _exit_as_run(records, summarize(records), results, planned=header.get("planned") is True)


@cli.command()
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="Where to write the .ipynb file.")
@click.option("--execute", is_flag=True, help="Run every cell offline (nbclient, kernel python3) and keep outputs.")
@click.option("--suite", "suite_names", multiple=True,
              help="Built-in suites to include (repeat the option; default: tutorial, unless --from is given).")
@click.option("--from", "ledgers", multiple=True, metavar="LEDGER",
              help="A ledger file (JSON or TOML) whose checks the notebook teaches (repeat the option).")
def notebook(output: str, execute: bool, suite_names: tuple[str, ...], ledgers: tuple[str, ...]) -> None:
    """Write a notebook that teaches PyTorch gradients: per check the derivation first, then the torch
    code (backward and .grad, torch.autograd.grad, a central difference), then gradaudit's comparison."""
    from . import suites
    from .render import notebook as nbr

    if not suite_names and not ledgers:
        suite_names = ("tutorial",)
    for name in suite_names:
        if not suites.known(name):
            raise SpecError(f"there is no built-in suite '{name}'; built-in suites: {', '.join(suites.names())}.")
    _distinct_outputs(ledgers, output=output)  # (-o naming a --from ledger replaced it with the notebook)
    nb = nbr.build(suite_names, ledgers)
    if execute:
        nbr.execute(nb, cwd=Path(output).resolve().parent)
    nbr.write(nb, output)
    _finished()
    click.echo(f"notebook: {output}" + (" (executed)" if execute else ""))


@cli.command()
@click.argument("targets", nargs=-1, required=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the planned records to this file instead of standard output.")
def plan(targets: tuple[str, ...], json_path: str | None) -> None:
    """Print the records the checks will fill, without running any check.

    Loading a ledger evaluates each expression once at its point, without gradients (a gradient expectation
    must be of one number, said before anything runs): a ledger whose forward needs much memory needs it here too.

    Each record has "observed_gradient": null and "executed": false; `gradaudit run`
    fills them and keeps the expectation fields byte-identical (expectation_sha256).
    """
    from .ledger import results_text, write_atomic
    from .record import dumps

    _distinct_outputs(targets, json=json_path)
    records = [r for _, checks in _load_targets(targets) for r in plan_checks(checks)]
    if json_path:
        write_atomic(json_path, results_text(records, {"targets": list(targets), "planned": True}))
        _finished()
        click.echo(f"{len(records)} planned records: {json_path}")
    else:
        for r in records:
            click.echo(_for_terminal(dumps(r.to_dict())))


@cli.command()
@click.argument("function")
@click.option("--at", "at", multiple=True, required=True, metavar="NAME=VALUE",
              help="The point, one input at a time, e.g. --at x=0.7.")
@click.option("--input", "wrt", help="The input to differentiate (default: the first in the expression).")
@click.option("--dtype", "dtypes", multiple=True, default=("float64", "float32"), show_default=True,
              help="Dtypes to study (repeat the option).")
@click.option("--plot", "plots", multiple=True, type=click.Path(dir_okay=False),
              help="Write the V curve as .png or .svg (repeat for both; needs matplotlib).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the study as JSON.")
def steps(function: str, at: tuple[str, ...], wrt: str | None, dtypes: tuple[str, ...], plots: tuple[str, ...],
          json_path: str | None) -> None:
    """Study the finite-difference error against the step h for FUNCTION at a point.

    Truncation error falls as h^2 and rounding error grows as eps|f|/h: the table shows
    the V for each dtype, the best step measured and the theoretical optimum
    h* = (3 eps |f| / |f'''|)^(1/3). Example: gradaudit steps "sin(x)*exp(x)" --at x=0.7
    """
    import math

    from .ledger import write_atomic
    from .record import dumps
    from .study import study

    # each output its own regular file (--json and --plot naming one file wrote the plot over the study; a plot
    # under a file raised FileExistsError), checked before any work
    _distinct_outputs((), json=json_path, **{f"plot {i + 1}": p for i, p in enumerate(plots)})
    point = {}
    for item in at:
        name, sep, value = item.partition("=")
        try:
            point[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not math.isfinite(point.get(name.strip(), 0.0)):
            raise SpecError(f"--at takes NAME=VALUE with a finite number, e.g. --at x=0.7; got {item!r}.")
    result = study(function, point, wrt=wrt, dtypes=dtypes)
    from .render.facts import study_lines

    for line in study_lines(result):
        click.echo(line)
    if json_path:
        write_atomic(json_path, dumps(result, indent=2) + "\n")
        click.echo(f"study: {json_path}")
    written: list[Path] = []
    if plots:
        from .render.plots import step_plot

        written = step_plot(result, plots)
    if json_path or plots:
        _finished()
    for path in written:
        click.echo(f"plot: {path}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the block as JSON.")
def env(as_json: bool) -> None:
    """Describe Python, torch and each accelerator: compiled, available, devices, ready."""
    from .env import environment
    from .record import dumps
    from .render.facts import environment_lines

    block = environment()
    if as_json:
        click.echo(_for_terminal(dumps(block, indent=2)))
    else:
        for line in environment_lines(block):
            click.echo(line)


class _PipeSafe:
    """Standard output that a reader may close early (``gradaudit run | head``): from then on the output
    goes nowhere and the command goes on (results files are still written; the exit code is the run's),
    where a closed pipe would otherwise abort it with exit code 1, which means "a check failed"."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return int(self._stream.write(text))
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        import os

        self.closed_pipe = True
        try:  # what is still buffered, and Python's own flush at exit, go to /dev/null
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one readable paragraph and exit code 2.

    Without *argv* this is the program (the ``gradaudit`` command, ``python -m gradaudit``): once a command has
    written its files, Ctrl-C stays ignored until the process ends. Called with *argv* (from Python, in a process
    that goes on), the caller's Ctrl-C handler is put back on the way out."""
    global _PROGRAM
    _PROGRAM = argv is None
    try:
        _main_stdout(argv)
    finally:
        if argv is not None:
            _restore_sigint()


def _main_stdout(argv: list[str] | None) -> None:
    stdout = sys.stdout
    if stdout is None:  # no standard output at all (closed before start): click writes nothing
        _main(argv)
        return
    sys.stdout = _PipeSafe(stdout)  # type: ignore[assignment]
    try:
        _main(argv)
    finally:
        sys.stdout.flush()  # a closed pipe found here, not in Python's flush at exit (exit code 120)
        sys.stdout = stdout


#: the commands that compute (and import torch); the others (report, --help) start without it
_TORCH_COMMANDS = {"run", "plan", "steps", "env", "notebook"}


def _main(argv: list[str] | None) -> None:
    _WRITTEN.clear()
    try:
        args = sys.argv[1:] if argv is None else argv
        if args and args[0] in _TORCH_COMMANDS and not {"--help", "-h"} & set(args):
            from .guard import import_torch

            import_torch()  # before the command: Ctrl-C in torch's own import would abort the process
        cli.main(args=argv, prog_name="gradaudit", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        if _WRITTEN:
            click.echo(f"interrupted after writing {', '.join(clean(p, newlines=False) for p in _WRITTEN)}; any other "
                       "results file named keeps its earlier contents.", err=True)
        else:
            click.echo("interrupted: nothing was written; results files are replaced only when a run completes, so "
                       "earlier ones are untouched.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except GradauditError as exc:
        click.echo(f"gradaudit: error: {clean(str(exc), newlines=False)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)

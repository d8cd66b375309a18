"""The ``gradaudit`` command line: run, plan, env.

Exit codes: 0 every check passed, 1 a check failed or errored, 2 usage or input error.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from .errors import EXIT_CHECK_FAILED, EXIT_USAGE, GradauditError, SpecError
from .run import plan as plan_checks
from .run import run as run_checks


def _load_targets(targets: tuple[str, ...]) -> list[tuple[str, list[Any]]]:
    """Resolve each target to (label, checks): a ledger file if it exists, else a built-in suite."""
    from . import suites
    from .expr import _suggest
    from .ledger import read_ledger

    out: list[tuple[str, list[Any]]] = []
    for target in targets or tuple(suites.names()):
        if Path(target).exists() or target.endswith((".json", ".toml")):
            out.append((target, read_ledger(target)))
        elif target in suites.BUILTIN:
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
    return f"gradaudit run {shlex.quote(label)} --check {shlex.quote(name)}"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gradaudit")
def cli() -> None:
    """Verify PyTorch gradients against expectations written first.

    Each check compares an analytical gradient with what backward() stores in .grad,
    what torch.autograd.grad returns, and what finite differences (float64) estimate.
    """


@cli.command()
@click.argument("targets", nargs=-1)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write records as JSON Lines (atomically).")
@click.option("--check", "pattern", help="Run only checks whose name contains this text.")
@click.option("--list", "list_only", is_flag=True, help="List the checks without running them.")
@click.option("--width", type=int, default=None, help="Table width (default: the terminal's).")
def run(targets: tuple[str, ...], json_path: str | None, pattern: str | None, list_only: bool,
        width: int | None) -> None:
    """Run the checks of built-in SUITES or ledger FILES (default: every built-in suite)."""
    from .env import environment, summary_lines
    from .ledger import results_text, write_atomic
    from .record import run_failed, summarize
    from .render.text import make_console, render

    loaded = _select(_load_targets(targets), pattern)
    console = make_console(width=width)
    if list_only:
        for label, checks in loaded:
            console.print(f"{label}:", highlight=False, markup=False)
            for c in checks:
                how = ", ".join(getattr(c, "methods", ())) or f"observation of {len(c.expected)} facts"
                console.print(f"  {c.name} — {how} — {c.source}", highlight=False, markup=False)
        return
    env = environment()
    records = []
    repro = {}
    try:
        for label, checks in loaded:
            records += run_checks(checks, environment_id=env["id"])
            repro.update({c.name: _repro(label, c.name) for c in checks})
    except KeyboardInterrupt:
        click.echo(f"interrupted after {len(records)} records; nothing was written"
                   + (f" and {json_path} is untouched" if json_path else "") + ".", err=True)
        sys.exit(130)
    counts = summarize(records)
    if json_path:
        header = {"environment": env, "targets": [label for label, _ in loaded], "summary": counts}
        write_atomic(json_path, results_text(records, header))
    render(records, console, repro=repro, environment_lines=summary_lines(env))
    if json_path:
        console.print(f"records: {json_path}", highlight=False, markup=False)
    if run_failed(counts):
        sys.exit(EXIT_CHECK_FAILED)


@cli.command()
@click.argument("targets", nargs=-1, required=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the planned records to this file instead of standard output.")
def plan(targets: tuple[str, ...], json_path: str | None) -> None:
    """Print the records the checks will fill, without calling any function.

    Each record has "observed_gradient": null and "executed": false; `gradaudit run`
    fills them and keeps the expectation fields byte-identical (expectation_sha256).
    """
    from .ledger import results_text, write_atomic
    from .record import dumps

    records = [r for _, checks in _load_targets(targets) for r in plan_checks(checks)]
    if json_path:
        write_atomic(json_path, results_text(records, {"targets": list(targets), "planned": True}))
        click.echo(f"{len(records)} planned records: {json_path}")
    else:
        for r in records:
            click.echo(dumps(r.to_dict()))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the block as JSON.")
def env(as_json: bool) -> None:
    """Describe Python, torch and each accelerator: compiled, available, devices, ready."""
    from .env import environment, summary_lines
    from .record import dumps

    block = environment()
    if as_json:
        click.echo(dumps(block, indent=2))
    else:
        for line in summary_lines(block):
            click.echo(line)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one readable paragraph and exit code 2."""
    try:
        cli.main(args=argv, prog_name="gradaudit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except GradauditError as exc:
        click.echo(f"gradaudit: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)

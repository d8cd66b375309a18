"""Shared helpers: run the CLI in-process and capture exit code, stdout and stderr."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gradaudit.cli import main


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def cli(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")

    def invoke(*argv: str) -> Result:
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return invoke


@pytest.fixture
def ledger(tmp_path: Path):
    """Write a ledger file (JSON unless the name says .toml) and return its path."""

    def write(content, name: str = "ledger.json") -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return write


@pytest.fixture
def bench_script():
    """Load a script of bench/ as a module: bench_script("paired").main([...])."""
    root = Path(__file__).resolve().parent.parent

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"_bench_{name}", root / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load

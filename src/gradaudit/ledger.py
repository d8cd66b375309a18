"""Ledger files (JSON or TOML) of expectations, and result files written atomically.

A ledger is data: it is parsed, never evaluated. The simplest record shape:

>>> checks = parse_ledger({"function": "x*x", "x": 3, "analytical_gradient": 6}, where="demo")
>>> checks[0].name, checks[0].inputs["x"].dtype
('x*x', 'float64')

A file holds one record, a list of records, or a table with ``checks = [...]``.
Keys other than the known ones below are inputs: ``"x": 3`` or
``"x": {"value": [1, 2], "dtype": "float32", "requires_grad": false}``. Numbers
written without a decimal point become float64: evidence is float64 by default.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import expr as _expr
from .errors import GradauditError, SpecError
from .record import SCHEMA_VERSION, Record, dumps, schema_error
from .spec import Expectation, ExpectedError, InputSpec
from .tolerances import Tolerance

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RECORD_KEYS = (
    "name", "function", "inputs", "analytical_gradient", "derivation", "tolerance", "methods",
    "protocol", "expect_error", "expect", "expect_why", "source", "dtype", "device",
    "observed_gradient", "executed", "step", "scheme", "convention", "timeout",
)
MAX_NESTING = 64  # levels of lists and tables in a ledger or results line (a 10-d tensor needs 10)
FILE_KEYS = ("checks", "suite", "source", "title", "description", "dtype", "device")
INPUT_KEYS = ("value", "dtype", "device", "requires_grad")


def read_ledger(path: str | Path) -> list[Expectation]:
    """Load the checks of a JSON or TOML ledger file; SpecError names the file and field."""
    p = Path(path)
    try:
        exists, is_dir = p.exists(), p.is_dir()
    except OSError as exc:  # a name too long for the file system, no permission on a folder: a bare OSError
        raise SpecError(f"cannot be read: {exc.strerror or exc}. Give the path of a .json or .toml ledger.",
                        where=str(path)) from None
    if not exists:
        raise SpecError("no such ledger file. Give the path of a .json or .toml ledger, or the "
                        "name of a built-in suite.", where=str(path))
    if is_dir:
        raise SpecError("this is a directory; give a .json or .toml ledger file.", where=str(path))
    try:
        # (utf-8-sig: a byte-order mark, as some editors on Windows write, is read past; JSON's message asked the
        # user to "decode using utf-8-sig", TOML's said "Invalid statement")
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot be read: {exc}.", where=str(path)) from None
    return parse_ledger(parse_text(text, p.suffix.lower(), where=str(path)), where=str(path),
                        suite=p.stem)


def parse_text(text: str, suffix: str, *, where: str) -> Any:
    """Parse JSON or TOML text; errors say line and column."""
    if suffix not in (".json", ".toml", ""):
        raise SpecError(f"has the extension '{suffix}'; ledgers are .json or .toml files.", where=where)
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)  # (TOML refuses a key written twice itself: "Cannot overwrite a value")
        else:
            data = _loads(text)
    except DuplicateKey as exc:
        raise SpecError(exc.message(), where=where if exc.record is None else f"{where} record {exc.record}",
                        field=exc.field) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"is not valid TOML: {exc}. Fix the syntax at that place.", where=where) from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"is not valid JSON: {exc.msg.removesuffix(' at')} at line {exc.lineno}, column {exc.colno}. "
                        "Fix the syntax at that place.", where=where) from None
    except (RecursionError, ValueError) as exc:
        raise SpecError(_parse_failure(exc), where=where) from None
    check_nesting(data, where=where)
    return data


def _parse_failure(exc: BaseException) -> str:
    """The message for a parser that gave up: nesting too deep, or an integer too long to read."""
    if isinstance(exc, RecursionError):
        return (f"is nested too deeply to read (lists or tables inside each other; at most {MAX_NESTING} levels "
                "are allowed). A ledger or a results file needs a few: records, inputs, nested lists for tensors.")
    if "digits" in str(exc):
        return ("holds an integer with more than 4300 digits; its numbers must fit a float64 "
                "(at most about 1.8e308). Write the number you mean.")
    return f"cannot be read: {exc}."


def check_nesting(data: Any, *, where: str) -> None:
    """Refuse data nested deeper than MAX_NESTING (checked without recursion)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(f"is nested too deeply (more than {MAX_NESTING} levels of lists or tables); a ledger or a "
                            "results file needs a few: records, inputs, nested lists for tensors.", where=where)
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


class _Constant(ValueError):
    """NaN, Infinity or -Infinity in JSON text (Python reads them; JSON has no such numbers)."""


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (json keeps the last value, dropping the first without a word)."""

    def __init__(self, root: Any, path: tuple[Any, ...], key: str, values: tuple[Any, Any]):
        self.root, self.path, self.key, self.values = root, path, key, values
        super().__init__(key)

    @property
    def record(self) -> int | None:
        """The ledger record (from 1) that holds the object; None for the file's top level."""
        root, path = self.root, self.path
        if isinstance(root, list):
            return path[0] + 1 if path else None
        if isinstance(root, dict) and "checks" in root:
            return path[1] + 1 if len(path) >= 2 and path[0] == "checks" and isinstance(path[1], int) else None
        return 1

    @property
    def field(self) -> str:
        """The key's place inside its record (or the file), dotted: x, x.value, tolerance.atol."""
        inner = self.path[(0 if self.record is None else 1 if isinstance(self.root, list)
                           else 2 if isinstance(self.root, dict) and "checks" in self.root else 0):]
        return ".".join([*(str(k) for k in inner), self.key])

    def message(self, inside: str = "") -> str:
        first, second = (_short_json(v) for v in self.values)
        return (f"the key {self.key!r}{inside} is given twice ({first}, then {second}); JSON keeps only the last "
                "value, so the other would be dropped without a word. Write each key once.")


def _short_json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _loads(text: str) -> Any:
    """json.loads for ledgers and results: NaN and Infinity refused (a JSONDecodeError at their line and column),
    a key given twice in one object refused (DuplicateKey: the first such object met from the top, depth first)."""
    twice: dict[int, tuple[dict[str, Any], str, tuple[Any, Any]]] = {}  # (the object kept: its id stays its own)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) < len(items):
            seen: dict[str, Any] = {}
            for key, value in items:
                if key in seen:
                    twice[id(obj)] = (obj, key, (seen[key], value))
                    break
                seen[key] = value
        return obj

    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=pairs)
    except _Constant as exc:
        raise json.JSONDecodeError(f"{exc} is not JSON; write a number", text, _constant_at(text)) from None
    if twice:
        stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]  # in the order of the text (depth first)
        while stack:
            value, path = stack.pop()
            if isinstance(value, dict):
                if id(value) in twice:
                    _, key, values = twice[id(value)]
                    raise DuplicateKey(data, path, key, values)
                stack.extend(reversed([(v, (*path, k)) for k, v in value.items()]))
            elif isinstance(value, list):
                stack.extend(reversed([(v, (*path, i)) for i, v in enumerate(value)]))
    return data


def _constant_at(text: str) -> int:
    """Where the first NaN/Infinity outside a string is (the decoder read up to it; its hook is not told where)."""
    import re

    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', text):
        if m.group(1):
            return m.start(1)
    return 0


def parse_ledger(data: Any, *, where: str, suite: str = "") -> list[Expectation]:
    """Turn parsed ledger data into checks."""
    check_nesting(data, where=where)
    defaults: dict[str, Any] = {}
    if isinstance(data, Mapping) and "checks" in data:
        unknown = sorted(set(data) - set(FILE_KEYS))
        if unknown:
            raise SpecError(f"unknown top-level key(s) {', '.join(unknown)}; a ledger with 'checks' "
                            f"may also hold {', '.join(k for k in FILE_KEYS if k != 'checks')}.", where=where)
        suite = data.get("suite", suite)
        for key in ("suite", "source", "title", "description"):  # (a suite of 5 wrote records report refused)
            if key in data and not isinstance(data[key], str):
                raise SpecError(f"the top-level '{key}' must be a string; got {type(data[key]).__name__} "
                                f"({data[key]!r}).", where=where, field=key)
        defaults = {k: data[k] for k in ("source", "dtype", "device") if k in data}
        data = data["checks"]
    records = [data] if isinstance(data, Mapping) else data
    if not isinstance(records, list):
        raise SpecError(f"a ledger holds a record, a list of records or {{\"checks\": [...]}}; got "
                        f"{type(data).__name__}.", where=where)
    if not records:
        raise SpecError("the ledger is empty: it holds no checks. Add a record such as "
                        '{"function": "x*x", "x": 3.0, "analytical_gradient": 6}.', where=where)
    checks: list[Expectation] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(records, 1):
        at = f"{where} record {i}"
        try:
            check = _check_from_record(rec, defaults, suite=suite, where=where, index=i)
        except SpecError as exc:
            raise exc.located(at) from None
        if check.name in seen:
            raise SpecError(f"the check name '{check.name}' is used by records {seen[check.name]} and "
                            f"{i}; give each record a distinct 'name'.", where=where)
        seen[check.name] = i
        checks.append(check)
    return checks


def _check_from_record(rec: Any, defaults: Mapping[str, Any], *, suite: str, where: str,
                       index: int) -> Expectation:
    if not isinstance(rec, Mapping):
        raise SpecError(f"a record must be an object with 'function', the inputs and "
                        f"'analytical_gradient'; got {type(rec).__name__}.")
    if "function" not in rec:
        raise SpecError("the record has no 'function', e.g. \"function\": \"x*x\".", field="function")
    if rec.get("observed_gradient") is not None or rec.get("executed"):
        raise SpecError("this record already holds an observed gradient: it is a result, not an "
                        "expectation. A ledger records expectations only (observed_gradient null).",
                        field="observed_gradient")
    dtype = rec.get("dtype", defaults.get("dtype", "float64"))
    device = rec.get("device", defaults.get("device", "cpu"))
    if "inputs" in rec and not isinstance(rec["inputs"], Mapping):
        raise SpecError("'inputs' must be an object of name: value, e.g. {\"x\": 3.0}; got "
                        f"{type(rec['inputs']).__name__}.", field="inputs")
    raw_inputs = dict(rec.get("inputs") or {})
    for key, value in rec.items():
        if key not in RECORD_KEYS:
            if key in raw_inputs:
                raise SpecError(f"the input '{key}' is given twice (top level and in 'inputs').", field=key)
            _not_a_misspelled_field(key, rec["function"])
            raw_inputs[key] = value
    inputs = {n: _input(n, v, dtype, device) for n, v in raw_inputs.items()}
    if not inputs:
        raise SpecError("the record has no inputs; add one such as \"x\": 3.0.", field="inputs")
    function = rec["function"]
    if not isinstance(function, str):
        raise SpecError("'function' must be an expression string such as \"sum(x*x)\".", field="function")
    _expr.parse(function, allowed_names=tuple(inputs))  # unknown names fail before anything else
    kwargs: dict[str, Any] = {}
    for key in ("derivation", "expect", "expect_why"):
        if key in rec:
            kwargs[key] = _string(rec[key], key)
    for key in ("methods", "protocol"):
        if key in rec:
            if not isinstance(rec[key], list):
                raise SpecError(f"'{key}' must be a list of strings.", field=key)
            kwargs[key] = tuple(rec[key])
    if "tolerance" in rec:
        kwargs["tolerance"] = _tolerance(rec["tolerance"])
    for key in ("step", "scheme", "convention", "timeout"):
        if key in rec:
            kwargs[key] = rec[key]
    if "expect_error" in rec:
        kwargs["expect_error"] = _expected_error(rec["expect_error"])
    name = _string(rec.get("name", function), "name")
    source = _string(rec.get("source", defaults.get("source", f"{Path(where).name} record {index}")), "source")
    if "analytical_gradient" not in rec and "expect_error" not in rec:
        raise SpecError("the record has no 'analytical_gradient': write the expected derivative "
                        "first, e.g. \"analytical_gradient\": 6 for x*x at x=3.", field="analytical_gradient")
    return Expectation(name=name, function=function, inputs=inputs, expected=rec.get("analytical_gradient", {}),
                 source=source, suite=suite, **kwargs)


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"'{key}' must be a string; got {value!r}.", field=key)
    return value


def _not_a_misspelled_field(key: str, function: Any) -> None:
    """A top-level key that is not a record field is an input of the function; one the function does not use and
    that is spelled nearly like a field (tolerence, derivaton, setp) is a misspelled field, and said so."""
    import difflib
    import re

    if not isinstance(function, str) or re.search(rf"(?<![A-Za-z0-9_]){re.escape(key)}(?![A-Za-z0-9_])", function):
        return
    close = difflib.get_close_matches(key, [k for k in RECORD_KEYS if k != "inputs"], n=1, cutoff=0.75)
    if close:
        raise SpecError(f"unknown field '{key}': did you mean '{close[0]}'? A key that is not a record field is an "
                        f"input of the function, and {function!r} does not use '{key}'.", field=key)


def _input(name: str, value: Any, dtype: str, device: str) -> InputSpec:
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(INPUT_KEYS))
        if unknown or "value" not in value:
            import difflib

            hints = [f"'{k}': did you mean '{m[0]}'?" for k in unknown
                     if (m := difflib.get_close_matches(k, list(INPUT_KEYS), n=1, cutoff=0.75))]
            raise SpecError(f"an input written as an object takes {', '.join(INPUT_KEYS)} (value "
                            f"required); got {', '.join(sorted(value))}." + (f" {' '.join(hints)}" if hints else ""),
                            field=name)
        return InputSpec(name=name, value=value["value"], dtype=_string(value.get("dtype", dtype), f"{name}.dtype"),
                         device=_string(value.get("device", device), f"{name}.device"),
                         requires_grad=value.get("requires_grad", True))
    return InputSpec(name=name, value=value, dtype=dtype, device=device)


def _tolerance(value: Any) -> Tolerance:
    if not isinstance(value, Mapping) or not {"atol", "rtol"} <= set(value) or set(value) - {"atol", "rtol", "why"}:
        raise SpecError("'tolerance' takes both atol and rtol, and a why when they differ from the "
                        "default, e.g. {\"atol\": 1e-6, \"rtol\": 1e-5, \"why\": \"...\"}.", field="tolerance")
    return Tolerance(atol=value["atol"], rtol=value["rtol"], why=value.get("why"))


def _expected_error(value: Any) -> ExpectedError:
    if not isinstance(value, Mapping) or "type" not in value or set(value) - {"type", "match", "explanation"}:
        raise SpecError("'expect_error' takes type, match (a regular expression) and explanation, "
                        "e.g. {\"type\": \"RuntimeError\", \"match\": \"second time\"}.", field="expect_error")
    return ExpectedError(type=value["type"], match=value.get("match", ""),
                         explanation=value.get("explanation", ""))


# -- results -------------------------------------------------------------------------

def as_path(path: Any) -> Path:
    """A results path as a Path: a str, a path object, or bytes (as open() takes them); anything else a SpecError
    (an int or bytes raised a bare TypeError)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise SpecError(f"the results path must be a str or a pathlib.Path; got {type(path).__name__} ({path!r}).",
                        field="path")
    if not os.fspath(path):  # (Path("") is ".", the current folder: "  is a directory" said nothing useful)
        raise SpecError("the results path is empty; give the path of a file, such as results.jsonl.", field="path")
    return Path(path)


def check_target(path: str | Path, *, reading: bool = False) -> Path:
    """The file a report will replace: a regular file or a new one, never a FIFO, device or directory.
    A symbolic link is followed (the link stays, its target is replaced). Returns the path to write.

    With *reading*, the results file ``gradaudit report`` reads: the same checks (a FIFO would block the read),
    said of a file to read. A path that cannot be looked at (a name too long for the file system, a loop of
    symbolic links, no permission on a folder) is a SpecError, never a bare OSError."""
    p = target = as_path(path)
    try:
        target = Path(os.path.realpath(p)) if p.is_symlink() else p
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target  # (a results file to read that is missing is said by read_results)
    except OSError as exc:
        if reading:
            raise SpecError(f"cannot read results here: {exc.strerror or exc}. Give the path of a results file that "
                            "gradaudit run ... --json PATH wrote.", where=str(path)) from None
        raise SpecError(f"cannot write results here: {exc.strerror or exc}. Choose a writable path (a file name "
                        "the file system accepts, in a folder you may write).", where=str(path)) from None
    if stat.S_ISDIR(mode):
        if reading:
            raise SpecError("this is a directory; give the path of a results file inside it.", where=str(path))
        raise GradauditError(f"{path} is a directory; give the path of a results file inside it.")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "special")
        if reading:
            raise SpecError(f"this is {kind}, not a regular file; gradaudit report reads the results file that "
                            "gradaudit run ... --json PATH wrote. Give the path of that file.", where=str(path))
        raise GradauditError(f"{path} is {kind}, not a regular file; results are written atomically by replacing "
                             "a regular file, which would destroy it. Give the path of a file.")
    return target


def _clean_stale(directory: Path, name: str) -> None:
    """Remove temp files of *name* left by a run that was killed (its process is gone)."""
    for tmp in directory.glob(f".{glob.escape(name)}.*.tmp"):
        pid = tmp.name[len(name) + 2:].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # alive, or not ours to signal: leave it


def write_atomic(path: str | Path, text: str) -> None:
    """Write *text* to *path* so that a reader sees the old file or the new one, never half.

    Only a regular file (or a new one) is replaced; a failure (a full disk, a read-only file system,
    no permission) raises GradauditError with the message, leaves the earlier file as it was and
    removes the temporary file."""
    target = check_target(path)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale(target.parent, target.name)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
        # (a lone surrogate, from a file name that is not UTF-8, say, written as its escape: it crashed the write)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            try:  # the file it replaces keeps its permissions (a private 0600 results file became 0644)
                mode = stat.S_IMODE(os.stat(target).st_mode)
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask  # mkstemp makes 0600: give new results the usual permissions
            os.fchmod(fh.fileno(), mode)
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise GradauditError(f"{path}: cannot write results: {exc.strerror or exc}. The earlier file (if any) is "
                             "unchanged; free space or choose a writable path.") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def results_text(records: Iterable[Record], header: Mapping[str, Any]) -> str:
    """JSON Lines: a header line (kind "run": environment, summary), then one record a line."""
    lines = [dumps({"schema_version": SCHEMA_VERSION, "kind": "run", **header})]
    lines += [dumps(r.to_dict()) for r in records]
    return "\n".join(lines) + "\n"


def records_of(items: Iterable[Any]) -> list[Record]:
    """Records from a mix of records and results that hold them (ga.check results, audits)."""
    out: list[Record] = []
    for item in items:
        if isinstance(item, Record):
            out.append(item)
        elif hasattr(item, "records"):
            out.extend(records_of(item.records))
        else:
            raise SpecError(f"write_results takes records and check results; got {type(item).__name__}.",
                            field="items")
    return out


def write_results(path: str | Path, items: Iterable[Any], *, environment: Mapping[str, Any] | None = None) -> Path:
    """Write records (and the records of ``ga.check`` results) as the JSON Lines that
    ``gradaudit report`` renders; atomically. Returns the path.

    >>> import gradaudit as ga, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "r.jsonl")
    >>> _ = ga.write_results(path, ga.run([ga.Expectation("sq", "x*x", {"x": 3.0}, {"x": 6})]))
    >>> [r.verdict for r in ga.read_results(path)[1]]
    ['pass', 'pass', 'pass']
    """
    from .env import environment as env_block
    from .record import summarize

    path = as_path(path)
    if isinstance(items, Record) or hasattr(items, "records"):
        items = [items]  # one result (ga.check's, an audit) as it comes
    elif isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise SpecError(f"write_results takes a list of records and check results (or one result); got "
                        f"{type(items).__name__}.", field="items")
    if environment is not None and not (isinstance(environment, Mapping)
                                        and all(isinstance(k, str) for k in environment)):
        raise SpecError(f"environment must be a dict of facts with string keys (what ga.env gives, or your own, such "
                        f"as {{'ci_job': '42'}}); got {type(environment).__name__}.", field="environment")
    records = records_of(items)
    if not records:  # (gradaudit report refuses a file without records: none is written, an earlier one is kept)
        raise SpecError("write_results was given no records (an empty list, or results that hold none), so there "
                        "is nothing to report; pass the records of at least one check (ga.run(...), ga.check(...)). "
                        f"{str(path)!r} was not written.", field="items")
    env = dict(environment) if environment is not None else env_block()
    header = {"environment": env, "targets": sorted({r.suite for r in records}), "summary": summarize(records)}
    write_atomic(path, results_text(records, header))
    return Path(path)


def _contradiction(record: Record) -> str | None:
    """What in a record the schema admits but gradaudit never writes, which the reports would contradict: an
    outcome that is not its verdict's (a hand edit of "outcome" to "passed" left the row saying fail, the summary
    and exit code saying pass, JUnit 0 failures), an expected error that is not {"type": ..., ...} (every renderer
    crashed on a string)."""
    from .judge import outcome

    expect = record.expect if isinstance(record.expect, str) else "fail"
    if record.outcome != outcome(record.verdict, expect):
        return (f"has verdict {record.verdict!r} and outcome {record.outcome!r}, which disagree (verdict "
                f"{record.verdict!r} with expect {expect!r} is outcome {outcome(record.verdict, expect)!r})")
    error = record.expect_error
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("type"), str)):
        return f"has expect_error {error!r}, where gradaudit writes an object {{\"type\": \"RuntimeError\", ...}}"
    return None


def _environment_error(env: Any) -> str | None:
    """What is wrong with a results header's environment, for the renderers (None: nothing). Absent, or a dict whose
    own keys (env.environment's) hold what the renderers read: python, platform and torch dicts, accelerators a dict
    of dicts; the caller's other keys anything JSON."""
    if env is None:
        return None
    if not isinstance(env, dict):
        return f"must be a JSON object; got {type(env).__name__}"
    for key in ("python", "platform", "torch", "accelerators"):
        if key in env and not isinstance(env[key], dict):
            return f"field {key!r} must be a JSON object; got {type(env[key]).__name__}"
    accelerators = env.get("accelerators") or {}
    if not all(isinstance(a, dict) for a in accelerators.values()):
        return "field 'accelerators' must map each name to a JSON object"
    return None


def read_results(path: str | Path) -> tuple[dict[str, Any], list[Record]]:
    """Read a results file written by ``gradaudit run --json`` or ``ga.write_results``; returns (header, records)."""
    p = as_path(path)
    try:
        # JSON Lines end at "\n" alone: str.splitlines() also breaks at U+2028, U+2029 and U+0085, which json.dumps
        # keeps raw inside strings (ensure_ascii=False), and a file gradaudit wrote could not be read back
        lines = p.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read results: {exc}.", where=str(path)) from None
    header: dict[str, Any] = {}
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = _loads(line)
            check_nesting(obj, where=f"line {n}")
        except DuplicateKey as exc:
            inside = f" (in {'.'.join(map(str, exc.path))})" if exc.path else ""
            raise SpecError(f"line {n}: {exc.message(inside)}", where=str(path)) from None
        except json.JSONDecodeError as exc:
            raise SpecError(f"line {n} is not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}."
                            + _looks_like_a_ledger(p, lines), where=str(path)) from None
        except (RecursionError, ValueError) as exc:
            raise SpecError(f"line {n} {_parse_failure(exc)}", where=str(path)) from None
        except SpecError as exc:
            raise SpecError(f"line {n} {exc.bare_message}", where=str(path)) from None
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind == "run":
            env = obj.get("environment")
            broken = _environment_error(env)
            if broken:
                raise SpecError(f"line {n}: the run header's environment {broken}. Re-create the file with "
                                "gradaudit run ... --json PATH, or ga.write_results(path, records).", where=str(path))
            header = obj
        elif kind == "record":
            broken = schema_error(obj)
            if broken is not None:
                raise SpecError(f"line {n} is not a gradaudit record of schema version {SCHEMA_VERSION} ({broken}). "
                                "Re-create the file with this version of gradaudit (gradaudit run ... --json PATH).",
                                where=str(path))
            try:
                record = Record.from_dict(obj)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise SpecError(f"line {n} is not a gradaudit record of schema version {SCHEMA_VERSION}: {exc}. "
                                "Re-create the file with this version of gradaudit.", where=str(path)) from None
            contradiction = _contradiction(record)
            if contradiction:
                raise SpecError(f"line {n} (check {record.check!r}) {contradiction}; the file was edited or damaged. "
                                "Re-create it with gradaudit run ... --json PATH.", where=str(path))
            records.append(record)
        else:
            raise SpecError(f"line {n} is neither a run header nor a record (a JSON object with \"kind\": \"run\" "
                            f"or \"record\"); got {type(obj).__name__}"
                            + (f" with kind {kind!r}" if isinstance(obj, dict) else "") + "."
                            + _looks_like_a_ledger(p, lines), where=str(path))
    return header, records


def _looks_like_a_ledger(path: Path, lines: list[str]) -> str:
    """" This looks like a ledger ...": where a results file that fails to read is a ledger (expectations, with
    'function'), what to run instead; else nothing."""
    text = "\n".join(lines)
    try:
        data: Any = json.loads(text, parse_constant=_refuse_constant) if path.suffix != ".toml" else None
    except (json.JSONDecodeError, ValueError, RecursionError):
        data = None
    if data is None and path.suffix == ".toml" or (isinstance(data, Mapping) and "checks" in data):
        found = True
    else:
        items = data if isinstance(data, list) else [data]
        found = bool(items) and all(isinstance(r, Mapping) and "function" in r for r in items)
    return (f" It looks like a ledger (expectations, with 'function'), not results: run it with gradaudit run "
            f"{path.name} (add --json PATH to save results that gradaudit report reads).") if found else ""

"""Guards around the user's code: a time limit, and one fixed random state for every evaluation.

``time_limit(seconds)`` raises :class:`CheckTimeout` when the time is up: from a SIGALRM timer
where that exists (the main thread of a POSIX process, so a function that hangs in Python code is
interrupted), and at the next evaluation otherwise. The timer and the previous SIGALRM handler
are restored on the way out. ``CheckTimeout`` derives from BaseException so that a user's
``except Exception`` cannot swallow it.

``fixed_rng(seed, devices)`` runs one evaluation from the same random state every time (dropout
draws the same mask at every point, so the function is deterministic and checkable) and restores
the caller's random state afterwards.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class _Deadline(threading.local):
    """This thread's time limit: (monotonic deadline, seconds), or None (the class default, read without the
    AttributeError a missing attribute of a plain threading.local costs on every evaluation)."""

    value: tuple[float, float] | None = None


_deadline = _Deadline()

#: seconds after a timeout's alarm at which it fires again, while the limited block has not been left (long enough
#: for the cleanup a caller's handler may run inside the block after catching the first)
REFIRE = 0.5


class CheckTimeout(BaseException):
    """The check ran past its ``timeout``. *limit* is the limit's own token (what :func:`time_limit` yields), so that a
    check inside another's function tells its own timeout from the outer one's, which it lets pass."""

    def __init__(self, seconds: float, limit: object = None):
        self.seconds = seconds
        self.limit = limit
        super().__init__(f"timeout: the check did not finish within {seconds:g} s (timeout={seconds:g}); "
                         "it was stopped and the run went on. Raise timeout=, or check a smaller input.")


def expired() -> None:
    """Raise CheckTimeout if the current time limit has passed (called before each evaluation)."""
    limit = _deadline.value
    if limit is not None and time.monotonic() > limit[0]:
        raise CheckTimeout(limit[1], limit)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[object]:
    """Stop the enclosed work with CheckTimeout after *seconds* (None: no limit). Yields the limit's token, which the
    CheckTimeout it raises carries (None without a limit). The caller's own SIGALRM timer, due before the limit,
    still fires on time: its alarm is handed to the handler the caller had (it was held until the check ended, 4.4 s
    instead of 1 s: a fresh-eyes audit), and a timer that handler sets is the caller's next one; after the block the
    caller's timer runs on from where it is."""
    if seconds is None:
        yield None
        return
    outer = _deadline.value
    start = time.monotonic()
    mine = (start + seconds, seconds)
    deadline = mine[0]
    _deadline.value = mine
    use_signal = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not use_signal:
        try:
            yield mine
        finally:
            _deadline.value = outer
        return

    earlier = signal.getitimer(signal.ITIMER_REAL)
    caller: list[float | None] = [start + earlier[0] if earlier[0] > 0 else None, earlier[1]]  # its next alarm, period

    def _arm(now: float) -> None:
        due = caller[0]
        signal.setitimer(signal.ITIMER_REAL, max((deadline if due is None else min(deadline, due)) - now, 1e-3))

    def _alarm(signum: int, frame: Any) -> None:
        now = time.monotonic()
        due = caller[0]
        if due is not None and now >= due - 1e-3 and due <= deadline:  # the caller's alarm: to its own handler
            period = caller[1] or 0.0
            caller[0] = now + period if period > 0 else None
            signal.setitimer(signal.ITIMER_REAL, 0)  # (a timer the handler sets is then read back, below)
            try:
                if callable(previous):
                    previous(signum, frame)
                elif previous == signal.SIG_DFL:  # the caller's alarm would have ended the process: so it does
                    signal.signal(signal.SIGALRM, signal.SIG_DFL)
                    signal.raise_signal(signal.SIGALRM)
            finally:
                set_by_it = signal.getitimer(signal.ITIMER_REAL)
                if set_by_it[0] > 0:  # the handler armed the timer again itself: that is the caller's next alarm
                    caller[0], caller[1] = time.monotonic() + set_by_it[0], set_by_it[1]
                _arm(time.monotonic())
            return
        if now < deadline - 1e-3:  # not this limit's time yet (an alarm of the caller's that moved): wait on
            _arm(now)
            return
        # raised where the code happens to be; where that is a callback whose exceptions Python only reports (a
        # weakref's, a __del__), it is lost: the timer fires again shortly, until the limit's block is left
        signal.setitimer(signal.ITIMER_REAL, REFIRE)
        raise CheckTimeout(seconds, mine)

    unraisable = sys.unraisablehook

    def _quiet(info: Any) -> None:  # such a lost CheckTimeout is not printed as "Exception ignored in ..."
        if not isinstance(info.exc_value, CheckTimeout):
            unraisable(info)

    previous = signal.signal(signal.SIGALRM, _alarm)
    sys.unraisablehook = _quiet
    _arm(start)
    try:
        yield mine
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if sys.unraisablehook is _quiet:
            sys.unraisablehook = unraisable
        _deadline.value = outer
        if caller[0] is not None:  # the caller's own timer, from its next alarm
            signal.setitimer(signal.ITIMER_REAL, max(caller[0] - time.monotonic(), 1e-3), caller[1] or 0.0)


@contextmanager
def fixed_rng(seed: int, devices: Sequence[int] = ()) -> Iterator[None]:
    """Seed torch's CPU generator (and those of the given CUDA devices) with *seed*; restore them after.
    (``Problem._call`` does this itself for the CPU generator alone, once per evaluation, at less cost.)"""
    import torch

    with torch.random.fork_rng(devices=list(devices), device_type="cuda"):
        torch.random.default_generator.manual_seed(seed)
        for d in devices:
            torch.cuda.default_generators[d].manual_seed(seed)
        yield


class _Kept:
    """What :func:`host_random` keeps of one global generator between checks: the generator, how to read a
    fingerprint of its state in place (None where its layout was not confirmed against its own API: the full state is
    taken at every check), the fingerprint when the full state was last taken, and that state."""

    def __init__(self) -> None:
        self.generator: Any = None  # (held: the memory read in place stays this object's)
        self.read: Callable[[], Any] | None = None
        self.seen: Any = None
        self.full: Any = None


_python, _numpy = _Kept(), _Kept()
_MT_WORDS = 624  # MT19937's key words (Python's random and NumPy's legacy generator both)


def host_random() -> tuple[Any, Any]:
    """Python's and NumPy's global random states, for :func:`restore_host_random`: a function that draws from
    random or np.random (whose values then do not depend on it, or the check says it is not deterministic) is
    called many times by a check, and each call advanced the caller's generators. Torch's are fixed per evaluation
    and restored there (Problem._call). Taking either state through its API costs 6 and 30 µs, about 4% of a small
    check, so each is taken only where a fingerprint read in place moved since it was last taken: MT19937's
    position, its first four words and its last two (a draw moves the position, one that brings it round
    again has regenerated every word, and seeding sets them all; the layout confirmed once against
    getstate/get_state), with Python's gauss_next. NumPy's legacy Gaussian cache (randn's second value) can be used
    up without moving the words: where the state last taken holds one, it is taken again. A generator without a
    state (random.SystemRandom) is left alone; another NumPy bit generator (PCG64) is taken through its own state."""
    return _python_state(), _numpy_state()


def restore_host_random(saved: tuple[Any, Any]) -> None:
    """Put back the states :func:`host_random` took, where they moved."""
    py, np_saved = saved
    if py is not None:
        inst, seen, full = py
        if seen is None or _python.generator is not inst or _python.read is None or _python.read() != seen:
            inst.setstate(full)
    if np_saved is not None:
        generator, seen, full = np_saved
        if isinstance(full, dict):  # (another bit generator than MT19937: its own state, put back as it was)
            if generator.state != full:
                generator.state = full
        elif seen is None or _numpy.generator is not generator or _numpy.read is None or _numpy.read() != seen:
            legacy = getattr(sys.modules.get("numpy.random.mtrand"), "_rand", None)
            if legacy is not None:
                legacy.set_state(full)


def with_fresh_parametrizations(fn: Callable[..., Any]) -> Callable[..., Any]:
    """*fn*, each call of which runs with a parametrization cache of its own where
    ``torch.nn.utils.parametrize.cached()`` is on (the caller inside one, or another thread): the cache keeps a
    parametrized weight from its first computation, so every evaluation of a check read the weight of the first
    (perturbed parameters changed nothing: a correct model FAILED ``check_module``), and the caller's next forward
    read the weight the check had built from its private copies of the parameters, whose backward gave the caller's
    parameters no gradient (a fresh-eyes audit). Within one call the cache works as the caller asked; after it the
    caller's cache is back, untouched, unless its ``cached()`` ended meanwhile (then an empty one, as its end leaves).
    The cache's on/off counter is never touched: turning it off for a check broke it for good when another thread's
    ``cached()`` ended during the check (a review). *fn* itself where no cache is on now, and torch's module not
    loaded (nothing can turn one on without it)."""
    module = sys.modules.get("torch.nn.utils.parametrize")
    if not getattr(module, "_cache_enabled", 0):
        return fn

    def fresh_parametrizations(*args: Any, **kwargs: Any) -> Any:
        if not module._cache_enabled:  # type: ignore[union-attr]
            return fn(*args, **kwargs)
        saved, module._cache = module._cache, {}  # type: ignore[union-attr]
        try:
            return fn(*args, **kwargs)
        finally:
            module._cache = saved if module._cache_enabled else {}  # type: ignore[union-attr]
    return fresh_parametrizations


def _python_state() -> tuple[Any, Any, Any] | None:
    rnd = sys.modules.get("random")
    inst = getattr(rnd, "_inst", None)
    if inst is None:
        return None
    try:
        return _state(_python, _python_setup, lambda g: g.getstate(), inst)
    except NotImplementedError:  # (random.SystemRandom: no state, nothing to put back)
        return None


def _state(kept: _Kept, setup: Callable[[Any], Callable[[], Any] | None], full: Callable[[Any], Any],
           generator: Any, stale: Callable[[Any], bool] | None = None) -> tuple[Any, Any, Any]:
    """(generator, fingerprint or None, full state) of one global generator (:func:`host_random`); *stale*: whether
    a full state last taken may be out of date though the fingerprint did not move."""
    if kept.generator is not generator:
        kept.generator, kept.read, kept.seen = generator, None, None
        try:
            kept.read = setup(generator)
        except Exception:  # noqa: BLE001  (another interpreter or NumPy: the full state every time)
            kept.read = None
    if kept.read is None:
        return (generator, None, full(generator))
    now = kept.read()
    if now != kept.seen or (stale is not None and stale(kept.full)):
        kept.seen, kept.full = now, full(generator)
    return (generator, now, kept.full)


def _mt_reader(words: int, position: int) -> Callable[[], Any]:
    """A fingerprint of the MT19937 state whose 624 uint32 key words start at address *words* and whose int position
    is at address *position*: the position, the first four words and the last two."""
    import ctypes

    head = (ctypes.c_uint32 * 4).from_address(words)
    tail = (ctypes.c_uint32 * 2).from_address(words + 4 * (_MT_WORDS - 2))
    pos = ctypes.c_int32.from_address(position)
    return lambda: (pos.value, head[0], head[1], head[2], head[3], tail[0], tail[1])


def _python_setup(inst: Any) -> Callable[[], Any] | None:
    """CPython's RandomObject: the object header, an int index, then the 624 uint32 words (confirmed against
    getstate); None where it is laid out otherwise."""
    import array
    import ctypes

    if sys.implementation.name != "cpython" or type(inst).__basicsize__ < object.__basicsize__ + 4 + 4 * _MT_WORDS:
        return None  # (id() is an address, and the object holds the state after its header, in CPython only)
    version, internal, _ = inst.getstate()
    at = id(inst) + object.__basicsize__
    words = array.array("I", internal[:_MT_WORDS]).tobytes()
    index = int(internal[_MT_WORDS]).to_bytes(4, sys.byteorder, signed=True)
    if version != 3 or array.array("I").itemsize != 4 or ctypes.string_at(at, 4 + 4 * _MT_WORDS) != index + words:
        return None
    mt = _mt_reader(at + 4, at)
    return lambda: (mt(), inst.gauss_next)


def _numpy_state() -> tuple[Any, Any, Any] | None:
    # (numpy.random not imported: nothing has drawn from it, and reading np.random would import it, about 7 ms of a
    # process's first check; torch imports numpy, not numpy.random)
    legacy: Any = getattr(sys.modules.get("numpy.random.mtrand"), "_rand", None)
    generator = getattr(legacy, "_bit_generator", None)
    if legacy is None or generator is None:
        return None
    if type(generator).__name__ != "MT19937":  # (np.random.set_bit_generator: get_state would warn)
        return (generator, None, generator.state)
    # (a legacy Gaussian held: has_gauss, the fourth of get_state's five)
    return _state(_numpy, _numpy_setup, lambda g: legacy.get_state(), generator, lambda full: bool(full[3]))


def _numpy_setup(generator: Any) -> Callable[[], Any] | None:
    """NumPy's MT19937 state struct: the 624 uint32 key words, then an int position (confirmed against its state);
    None for another bit generator or layout."""
    import ctypes

    if type(generator).__name__ != "MT19937":
        return None
    at = generator.ctypes.state_address
    raw = ctypes.string_at(at, 4 * _MT_WORDS + 4)
    state = generator.state["state"]
    pos = int.from_bytes(raw[4 * _MT_WORDS:], sys.byteorder, signed=True)
    if raw[:4 * _MT_WORDS] != state["key"].tobytes() or pos != int(state["pos"]):
        return None
    return _mt_reader(at, at + 4 * _MT_WORDS)


@contextmanager
def deferring_sigint() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the enclosed work is done, then raise the KeyboardInterrupt it would have raised.

    ``import torch`` runs C++ initialisation that calls back into Python; a KeyboardInterrupt raised inside such a
    callback cannot unwind through the C++ frames, and the process aborts (SIGABRT, "terminate called after throwing
    an instance of 'pybind11::error_already_set'") instead of exiting 130 with its message. Only Python's own
    handler is replaced, and only in the main thread; an ignored SIGINT or the caller's own handler is left alone."""
    held: list[int] = []
    ours = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if ours:
        signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


def import_torch() -> None:
    """``import torch``, with Ctrl-C held until it is done (:func:`deferring_sigint`)."""
    import sys

    if "torch" in sys.modules:
        return
    with deferring_sigint():
        import torch  # noqa: F401


def with_private_buffers(fn: Callable[..., Any]) -> Callable[..., Any]:
    """*fn*, each call of which runs the nn.Modules it evaluates on private copies of their buffers: batch norm in
    train() mode updates its running statistics in place at every forward, and a check's many evaluations changed
    the caller's model (and each saw the statistics the one before left). The modules are the ones *fn* names:
    *fn* itself, a bound method's owner, a functools.partial's function and arguments, and the modules its code
    reads from its closure or its globals (one level: not those of the functions it calls), with those a dict, list
    or tuple there holds and those held in the attributes its code reads of an object there or of a bound
    method's owner (:func:`_held`). Every call starts
    from the buffers' values at the check's start (one copy per tensor: a buffer two modules share stays shared),
    and the modules hold their own buffer objects again after it (as check_module, whose own function is marked
    and left as it is). A buffer the call replaced is the module's own doing and stays as the call left it, no
    longer copied (a rotary embedding's cache, re-registered larger with its length in a plain attribute beside
    it; a model cast inside the function): putting the old one back broke the model. Lazy modules' uninitialized
    buffers are left alone. *fn* itself where it names none."""
    if getattr(fn, "_gradaudit_private_buffers", False):
        return fn
    import torch

    lazy = getattr(torch.nn.parameter, "UninitializedBuffer", ())
    held = [(m._buffers, k, b) for module in modules_named(fn) for m in module.modules()
            for k, b in m._buffers.items() if b is not None and not isinstance(b, lazy)]
    if not held:
        return fn
    start = {id(b): b.detach().clone() for _, _, b in held}  # (their values at the start, each tensor once)
    saved = [(own, k, b, id(b)) for own, k, b in held]

    def on_private_buffers(*args: Any, **kwargs: Any) -> Any:
        copies = {i: value.clone() for i, value in start.items()}  # a buffer two modules share stays shared
        for own, k, _, i in saved:
            own[k] = copies[i]
        try:
            return fn(*args, **kwargs)
        finally:
            kept = []
            for entry in saved:
                own, k, b, i = entry
                if own.get(k) is copies[i]:
                    own[k] = b
                    kept.append(entry)
            saved[:] = kept  # (a buffer the call replaced is the module's own now)
    return on_private_buffers


def modules_named(fn: Any) -> list[Any]:
    """The nn.Modules *fn* names (see :func:`with_private_buffers`), each once."""
    import torch

    named: list[tuple[str | None, Any]] = [(None, fn), (None, getattr(fn, "__self__", None))]
    if isinstance(fn, functools.partial):
        named += [(None, obj) for obj in (fn.func, *fn.args, *fn.keywords.values())]
        named += [(None, getattr(obj, "__self__", None)) for _, obj in named[2:]]
        fn = fn.func
    code = getattr(fn, "__code__", None)
    if code is not None:
        cells = getattr(fn, "__closure__", None)
        if cells:
            for name, cell in zip(code.co_freevars, cells):
                try:
                    named.append((name, cell.cell_contents))
                except ValueError:  # (an empty cell)
                    continue
        scope = getattr(fn, "__globals__", None)
        if scope:
            named += [(name, scope.get(name)) for name in code.co_names]
    module = torch.nn.Module
    if not _SKIPPED:
        _SKIPPED.append((*_NOT_HOLDERS, torch.Tensor))
    plain = _SKIPPED[0]
    found: dict[int, Any] = {}
    reads: set[str] | None = None
    keys: dict[str, frozenset[Any] | None] = {}
    for name, obj in named:
        if issubclass(type(obj), module):  # (type(), not isinstance: no __class__ of the user's is read)
            found.setdefault(id(obj), obj)
        elif obj is not None and not issubclass(type(obj), plain):  # (functions, modules, tensors: at once)
            if reads is None:  # (read once, where some object may hold a module)
                reads = set(code.co_names) if code is not None else set()
                keys = _subscripts(code) if code is not None else {}
            for inner in _held(obj, reads, plain, keys, name):
                if issubclass(type(inner), module):
                    found.setdefault(id(inner), inner)
    return list(found.values())


#: the most items of a dict, list or tuple looked into for modules (a larger one is data, not a model's holder)
HELD_ITEMS = 1000
#: objects never looked into for modules: classes, modules, functions, numbers and strings (tensors too: _held)
_NOT_HOLDERS: tuple[type, ...] = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                                  types.MethodType, functools.partial, int, float, complex, str, bytes)
_CONTAINERS = (dict, list, tuple)
_SKIPPED: list[tuple[type, ...]] = []  # _NOT_HOLDERS and torch.Tensor (made at the first call, torch imported then)
#: per code object, :func:`_subscripts` (code objects do not change; a bounded cache)
_SUBSCRIPTED: dict[Any, dict[str, frozenset[Any] | None]] = {}
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD"})


def _subscripts(code: Any) -> dict[str, frozenset[Any] | None]:
    """Per name the code loads (a global, a closure variable, an attribute), the constant keys it is subscripted by,
    where every load of it is one (MODELS["head"], stack[0], self.models["enc"]); None where it is used otherwise
    (models[name], a loop over it, passed on): every value of a container read that way is looked into."""
    got = _SUBSCRIPTED.get(code)
    if got is not None:
        return got
    import dis

    keys: dict[str, set[Any] | None] = {}
    found = list(dis.get_instructions(code))
    for i, ins in enumerate(found):
        if ins.opname not in _LOADS or not isinstance(ins.argval, str):
            continue
        key, then = (found[i + 1], found[i + 2]) if i + 2 < len(found) else (None, None)
        subscripted = (key is not None and then is not None and key.opname == "LOAD_CONST"
                       and (then.opname == "BINARY_SUBSCR" or (then.opname == "BINARY_OP" and then.argrepr == "[]")))
        seen = keys.get(ins.argval, set())
        if subscripted and seen is not None:
            try:
                hash(key.argval)  # type: ignore[union-attr]
            except TypeError:
                keys[ins.argval] = None
                continue
            seen.add(key.argval)  # type: ignore[union-attr]
            keys[ins.argval] = seen
        else:
            keys[ins.argval] = None
    frozen = {name: None if value is None else frozenset(value) for name, value in keys.items()}
    if len(_SUBSCRIPTED) >= 1024:
        _SUBSCRIPTED.clear()
    _SUBSCRIPTED[code] = frozen
    return frozen


def _items(obj: Any, wanted: frozenset[Any] | None) -> list[Any]:
    """The values of a dict, list or tuple, those at the *wanted* keys alone where given; none of one with more than
    HELD_ITEMS items read whole. A subclass may map its keys its own way (__missing__): both, those at the wanted
    keys (an OrderedDict of 1,500 entries read at one key: a review) and every value within HELD_ITEMS. Their own
    methods read them: a subclass's overrides run nothing."""
    cls = type(obj)
    whole_too = cls not in _CONTAINERS
    if issubclass(cls, dict):
        chosen = [] if wanted is None else [dict.__getitem__(obj, k) for k in wanted if dict.__contains__(obj, k)]
        if wanted is not None and not whole_too:
            return chosen
        return chosen + (list(dict.values(obj)) if dict.__len__(obj) <= HELD_ITEMS else [])
    size = list.__len__(obj) if issubclass(cls, list) else tuple.__len__(obj)
    at = list.__getitem__ if issubclass(cls, list) else tuple.__getitem__
    chosen = [] if wanted is None else [at(obj, k) for k in wanted if type(k) is int and -size <= k < size]
    if wanted is not None and not whole_too:
        return chosen
    return chosen + ([at(obj, k) for k in range(size)] if size <= HELD_ITEMS else [])


def _held(obj: Any, reads: set[str], skip: tuple[type, ...] = _NOT_HOLDERS,
          keys: dict[str, frozenset[Any] | None] | None = None, name: str | None = None) -> list[Any]:
    """What *obj* (named by the function, under *name* where it is a global or closure variable; not a module
    itself) holds that may be a module the function runs: the values of a dict, list or tuple (models["enc"],
    stack[0]: only those at the constant keys the code reads it by, *keys* (:func:`_subscripts`), where it reads it
    by nothing else), and of what they hold in turn (models["enc"][0]); of an instance of a class of the user's (a
    trainer whose bound method runs self.model), the attributes its instance dict holds that the function's code reads
    by name (*reads*), and what a dict, list or tuple there holds, as above. BatchNorm's running statistics in such a
    model moved at every evaluation of a check (a fresh-eyes audit), where a module named directly was guarded; a
    dict of twelve models of which the function runs one had all twelve's buffers copied at every evaluation (a
    review). The object's class decides (type(), not isinstance, which reads __class__ through a class's own
    __getattribute__), and its instance dict is read past its class's attribute machinery: no code of the user's
    runs. *skip*: the classes never looked into (modules_named adds torch.Tensor)."""
    cls = type(obj)
    if issubclass(cls, _CONTAINERS):
        items = _items(obj, None if keys is None or name is None else keys.get(name))
        return items + [inner for value in items if issubclass(type(value), _CONTAINERS)
                        for inner in _items(value, None)]
    if not reads or issubclass(cls, skip):
        return []
    try:
        attrs = object.__getattribute__(obj, "__dict__")
    except Exception:  # (no instance dict: __slots__, a builtin)
        return []
    if type(attrs) is not dict:
        return []
    got = [(attr, attrs[attr]) for attr in reads if attr in attrs]
    return [value for _, value in got] + [inner for attr, value in got if issubclass(type(value), _CONTAINERS)
                                          for inner in _held(value, reads, skip, keys, attr)]

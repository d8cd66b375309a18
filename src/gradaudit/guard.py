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

import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
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
    """The check ran past its ``timeout``."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"timeout: the check did not finish within {seconds:g} s (timeout={seconds:g}); "
                         "it was stopped and the run went on. Raise timeout=, or check a smaller input.")


def expired() -> None:
    """Raise CheckTimeout if the current time limit has passed (called before each evaluation)."""
    limit = _deadline.value
    if limit is not None and time.monotonic() > limit[0]:
        raise CheckTimeout(limit[1])


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Stop the enclosed work with CheckTimeout after *seconds* (None: no limit)."""
    if seconds is None:
        yield
        return
    outer = _deadline.value
    _deadline.value = (time.monotonic() + seconds, seconds)
    use_signal = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not use_signal:
        try:
            yield
        finally:
            _deadline.value = outer
        return

    def _alarm(signum: int, frame: Any) -> None:
        # raised where the code happens to be; where that is a callback whose exceptions Python only reports (a
        # weakref's, a __del__), it is lost: the timer fires again shortly, until the limit's block is left
        signal.setitimer(signal.ITIMER_REAL, REFIRE)
        raise CheckTimeout(seconds)

    unraisable = sys.unraisablehook

    def _quiet(info: Any) -> None:  # such a lost CheckTimeout is not printed as "Exception ignored in ..."
        if not isinstance(info.exc_value, CheckTimeout):
            unraisable(info)

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _alarm)
    sys.unraisablehook = _quiet
    earlier = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if sys.unraisablehook is _quiet:
            sys.unraisablehook = unraisable
        _deadline.value = outer
        if earlier[0] > 0:  # the caller's own timer, less the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(earlier[0] - (time.monotonic() - start), 1e-3), earlier[1])


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

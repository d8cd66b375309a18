"""The environment block: Python, platform, torch build, and accelerator readiness.

Installation is not readiness: an accelerator is *ready* only when a tensor moved
there gives the CPU's forward and backward results.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import sys
from typing import Any

from . import __version__


def _probe(device: str) -> tuple[bool, str]:
    """Move a tensor to *device*, run forward and backward, compare with the CPU."""
    import torch

    values = [0.5, 1.5, -2.0]

    def run(dev: str) -> tuple[Any, Any]:
        x = torch.tensor(values, dtype=torch.float32, device=dev, requires_grad=True)
        y = (torch.sin(x) * x).sum()
        y.backward()
        assert x.grad is not None
        return y.detach().cpu(), x.grad.detach().cpu()

    try:
        ref_y, ref_g = run("cpu")
        y, g = run(device)
    except Exception as exc:  # report, do not raise: readiness is a fact to record
        return False, f"probe raised {type(exc).__name__}: {exc}"
    ok = torch.allclose(y, ref_y, rtol=1e-5, atol=1e-6) and torch.allclose(g, ref_g, rtol=1e-5, atol=1e-6)
    detail = "forward and backward match the CPU" if ok else f"mismatch: value {y} vs {ref_y}, grad {g} vs {ref_g}"
    return ok, detail


def _cuda() -> dict[str, Any]:
    import torch

    compiled = torch.version.cuda or torch.version.hip
    info: dict[str, Any] = {
        "backend": "rocm" if torch.version.hip else "cuda",
        "compiled_with": compiled,
        "available": bool(compiled) and torch.cuda.is_available(),
        "devices": [],
    }
    if not compiled:
        info.update(ready=False, ready_detail="this torch build was compiled without CUDA or ROCm")
        return info
    if not info["available"]:
        info.update(ready=False, ready_detail="compiled in, but torch.cuda.is_available() is False "
                    "(no device or driver visible)")
        return info
    info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    info["ready"], info["ready_detail"] = _probe("cuda")
    return info


def _mps() -> dict[str, Any]:
    import torch

    built = bool(torch.backends.mps.is_built())
    info: dict[str, Any] = {"compiled_with": "mps" if built else None,
                            "available": built and torch.backends.mps.is_available(),
                            "devices": ["mps"] if built and torch.backends.mps.is_available() else []}
    if not built:
        info.update(ready=False, ready_detail="this torch build was compiled without MPS")
    elif not info["available"]:
        info.update(ready=False, ready_detail="MPS is built but not available on this machine")
    else:
        info["ready"], info["ready_detail"] = _probe("mps")
        info["float64"] = False  # MPS has no float64: evidence is computed on the CPU
    return info


def environment() -> dict[str, Any]:
    """The environment block, with a stable ``id`` (a hash of everything but the time)."""
    import torch

    block: dict[str, Any] = {
        "gradaudit": __version__,
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "description": platform.platform()},
        "torch": {
            "version": torch.__version__,
            "git_version": getattr(torch.version, "git_version", None),
            "debug": bool(getattr(torch.version, "debug", False)),
            "cuda_compiled": torch.version.cuda,
            "hip_compiled": torch.version.hip,
            "mps_built": bool(torch.backends.mps.is_built()),
            "num_threads": torch.get_num_threads(),
            "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        },
        "accelerators": {"cuda": _cuda(), "mps": _mps()},
    }
    block["id"] = hashlib.sha256(json.dumps(block, sort_keys=True, default=str).encode()).hexdigest()[:16]
    block["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    block["argv"] = [sys.argv[0].rsplit("/", 1)[-1], *sys.argv[1:]]
    return block


def ready_devices(block: dict[str, Any]) -> list[str]:
    """Names of the accelerators that passed the readiness probe."""
    return sorted(name for name, acc in block["accelerators"].items() if acc.get("ready"))

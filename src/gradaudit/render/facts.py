"""Text views of facts that are not records: the environment block and the step-size study."""

from __future__ import annotations

from typing import Any

#: the environment block's own keys (env.environment); any other key is the caller's (write_results(environment=))
KNOWN = ("id", "gradaudit", "python", "platform", "torch", "accelerators", "created", "argv")


def environment_lines(block: dict[str, Any]) -> list[str]:
    """A few human lines about the environment; facts the block does not hold are left out (a block given to
    ga.write_results(environment=...) holds what its caller put there, and crashed the report), the caller's own
    keys said as they are."""
    def part(*keys: str) -> Any:
        value: Any = block
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    facts = [f"{label}{value}" for label, value in (
        ("gradaudit ", part("gradaudit")), ("Python ", part("python", "version")), ("torch ", part("torch", "version")),
        ("", part("platform", "description")), ("env ", part("id"))) if value is not None]
    lines = [" · ".join(facts)] if facts else []
    accelerators = part("accelerators")
    for name, acc in (accelerators.items() if isinstance(accelerators, dict) else ()):
        if isinstance(acc, dict):
            devices = acc.get("devices")
            listed = ", ".join(map(str, devices)) if isinstance(devices, list) and devices else "none"
            lines.append(f"{name}: compiled with {acc.get('compiled_with') or 'nothing'}; "
                         f"available {'yes' if acc.get('available') else 'no'}; "
                         f"devices {listed}; "
                         f"ready {'yes' if acc.get('ready') else 'no'} ({acc.get('ready_detail', '')})")
    lines += [f"{key}: {value}" for key, value in block.items() if key not in KNOWN and key != "kind"]
    return lines


def study_lines(result: dict[str, Any]) -> list[str]:
    """The step study as text: error per step and dtype, best step, optimum, the float32 lesson."""
    dtypes = list(result["optimum"])
    by = {(r["dtype"], r["h"]): r for r in result["rows"]}
    hs = sorted({r["h"] for r in result["rows"]}, reverse=True)
    lines = [f"d/d{result['input']} {result['function']} at "
             + ", ".join(f"{k}={v:g}" for k, v in result["at"].items())
             + f" = {result['exact']:.17g} (reference: {result['reference']})", "",
             "h        " + "".join(f"{d + ' |error|':>18}" for d in dtypes)]
    for h in hs:
        cells = []
        for d in dtypes:
            r = by.get((d, h))
            mark = "*" if r is not None and result["optimum"][d]["best_h"] == h else " "
            cells.append(f"{r['abs_error']:>17.2e}{mark}" if r else f"{'—':>17} ")
        lines.append(f"{h:<9.0e}" + "".join(cells))
    lines.append("")
    for d, opt in result["optimum"].items():
        best = f"best h {opt['best_h']:.0e} (error {opt['best_error']:.2e})" if opt["best_h"] else "no step"
        star = (f"optimum h* = (3 eps |f| / |f'''|)^(1/3) = {opt['h']:.2e} (model error {opt['model_error']:.2e})"
                if opt["h"] else "no optimum: f''' is 0 here, so the largest step has no truncation error")
        lines.append(f"{d}: {best}; {star}")
    small = [r for r in result["rows"] if r["dtype"] == "float32" and r["h"] == 1e-6]
    best32 = result["optimum"].get("float32", {})
    if small and best32.get("best_error"):
        ratio = small[0]["abs_error"] / best32["best_error"]
        lines.append(f"float32 at h = 1e-06: error {small[0]['abs_error']:.2e}, {ratio:.0f}x its best: 32-bit "
                     "rounding noise swamps tiny steps")
    lines.append("* = the best step measured")
    return lines

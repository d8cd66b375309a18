"""The one dtype-keyed table of default tolerances (data only; no torch import)."""

from __future__ import annotations

#: (atol, rtol) for comparing an autograd gradient with an exact expectation,
#: keyed by the gradient's dtype (torch.testing.assert_close's table).
AUTOGRAD_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
}

#: (atol, rtol) for central-difference evidence, keyed by the dtype the evidence
#: was computed in, with the reason.
FD_TOLERANCES: dict[str, tuple[float, float, str]] = {
    "float64": (1e-6, 1e-6, "central differences in float64 at h = cbrt(eps)*max(1,|x|) err by "
                "about 1e-10 relative (truncation h^2|f'''|/6 plus rounding eps|f|/h); 1e-6 "
                "leaves four orders of margin"),
    "float32": (1e-3, 1e-3, "central differences in float32 err by about 1e-6 relative at best "
                "(rounding eps32|f|/h with eps32 = 1.2e-7)"),
    "float16": (1e-1, 1e-1, "float16 evidence carries about three significant digits"),
    "bfloat16": (1e-1, 1e-1, "bfloat16 evidence carries about two significant digits"),
}



def default_tolerance(method: str, dtype: str, evidence_dtype: str = "float64") -> tuple[float, float, str]:
    """The default (atol, rtol, basis) for *method* on a gradient of *dtype*."""
    if method == "finite_difference":
        atol, rtol, why = FD_TOLERANCES[evidence_dtype]
        return atol, rtol, why
    atol, rtol = AUTOGRAD_TOLERANCES[dtype]
    return atol, rtol, f"default for {dtype} gradients (torch.testing.assert_close's table)"


#: the derived tolerance is this many times the evidence's own error bound
SAFETY = 10.0
DERIVED_BASIS = ("derived from the evidence: 10 x (the scheme's error estimate + the rounding bound "
                 "eps|f|/h) per element, plus rtol 4 eps for the expectation's own rounding")

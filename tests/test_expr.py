import pytest
import torch

from gradaudit.errors import SpecError
from gradaudit.expr import parse


def test_evaluates_arithmetic_and_functions():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert float(parse("sum(x*x)")({"x": x})) == 14.0  # 1 + 4 + 9
    assert float(parse("-(2**3) + 1/4")({})) == -7.75
    assert float(parse("mean(x) - 2")({"x": x})) == 0.0
    e = parse("sin(x) * exp(w)", allowed_names=("x", "w"))
    assert e.names == ("x", "w") and e.functions == ("sin", "exp")


def test_constant_stays_python_float_so_dtype_is_kept():
    x = torch.tensor(3.0, dtype=torch.float32)
    assert parse("2*x")({"x": x}).dtype == torch.float32


@pytest.mark.parametrize("text, words", [
    ("__import__('os')", "unknown function '__import__'"),
    ("x.grad", "attribute access"),
    ("x[0]", "subscripts"),
    ("(lambda: 1)()", "other than a named function"),
    ("lambda: 1", "lambdas"),
    ("open('f')", "unknown function 'open'"),
    ("'abc'", "only numbers are allowed"),
    ("x if x else x", "conditional expressions"),
    ("sin(x, dim=0)", "positional arguments only"),
    ("x @ x", "operator MatMult"),
    ("x == x", "comparisons"),
    ("[x for x in y]", "comprehensions"),
])
def test_refuses_anything_outside_the_whitelist(text, words):
    with pytest.raises(SpecError) as info:
        parse(text, allowed_names=("x",))
    assert words in str(info.value)


def test_refusal_says_what_is_allowed():
    with pytest.raises(SpecError, match=r"Allowed: numbers, input names, \+ - \* / \*\*"):
        parse("x.__class__")


def test_unknown_function_suggests_the_close_one():
    with pytest.raises(SpecError, match="Did you mean 'sin'"):
        parse("sinn(x)")


def test_unknown_name_lists_the_inputs():
    with pytest.raises(SpecError, match=r"'y', which is not an input \(inputs: x\)"):
        parse("x*y", allowed_names=("x",))


def test_arity_and_syntax():
    with pytest.raises(SpecError, match="takes 1 argument"):
        parse("sin(x, x)")
    with pytest.raises(SpecError, match="not valid"):
        parse("x*")
    with pytest.raises(SpecError, match="non-empty"):
        parse("  ")


def test_huge_constant_power_is_an_error_not_a_hang():
    with pytest.raises(SpecError, match="cannot be computed"):
        parse("9.0**9999")({})

import pytest
import torch

from gradaudit import Expectation, ExpectedError, InputSpec, SpecError, Tolerance


def square(**kw):
    return Expectation(name="sq", function="x*x", **kw)


def test_number_inputs_default_to_float64():
    c = square(inputs={"x": 3}, expected={"x": 6})
    assert c.inputs["x"].dtype == "float64"
    assert c.inputs["x"].tensor().dtype == torch.float64


def test_integer_input_that_needs_a_gradient_is_refused():
    with pytest.raises(SpecError) as info:
        square(inputs={"x": InputSpec("x", 3, dtype="int64")}, expected={"x": 6})
    msg = str(info.value)
    assert "gradients exist only for floating-point tensors" in msg
    assert "3.0" in msg and "dtype=float64" in msg


def test_integer_tensor_input_is_refused_too():
    with pytest.raises(SpecError, match="floating-point"):
        square(inputs={"x": torch.tensor(3)}, expected={"x": 6})


def test_expected_of_wrong_shape():
    with pytest.raises(SpecError) as info:
        Expectation(name="s", function="sum(x)", inputs={"x": [1.0, 2.0, 3.0]}, expected={"x": [1.0, 1.0]})
    assert "shape (2,)" in str(info.value) and "shape (3,)" in str(info.value)
    assert info.value.field == "analytical_gradient.x"


def test_single_number_expectation_broadcasts():
    c = Expectation(name="s", function="sum(x)", inputs={"x": [1.0, 2.0, 3.0]}, expected={"x": 1})
    assert c.expected_tensor("x").tolist() == [1.0, 1.0, 1.0]  # d/dx_i sum(x) = 1


def test_formula_expectation_is_evaluated_from_the_inputs():
    c = Expectation(name="s", function="sum(x*x)", inputs={"x": [1.0, -2.0]}, expected={"x": "2*x"})
    assert c.expected_tensor("x").tolist() == [2.0, -4.0]


def test_tolerance_off_default_needs_why():
    with pytest.raises(SpecError, match="has no 'why'"):
        square(inputs={"x": 3.0}, expected={"x": 6}, tolerance=Tolerance(1e-3, 1e-3))
    c = square(inputs={"x": 3.0}, expected={"x": 6},
               tolerance=Tolerance(1e-3, 1e-3, why="float32 rounding of the input"))
    assert c.tolerance.why


def test_tolerance_equal_to_the_default_needs_no_why():
    c = Expectation(name="s", function="x*x", inputs={"x": 3.0}, expected={"x": 6}, methods=["backward"],
              tolerance=Tolerance(1e-7, 1e-7))
    assert c.tolerance.why is None


def test_unused_and_reserved_inputs():
    with pytest.raises(SpecError, match="not used by the function"):
        Expectation(name="s", function="x*x", inputs={"x": 3.0, "y": 1.0}, expected={"x": 6, "y": 0})
    with pytest.raises(SpecError, match="cannot name an input"):
        Expectation(name="s", function="x*x", inputs={"method": 3.0}, expected=6)


def test_missing_expectation_and_unknown_method():
    with pytest.raises(SpecError, match="no analytical gradient for the input"):
        Expectation(name="s", function="x*w", inputs={"x": 3.0, "w": 1.0}, expected={"x": 1})
    with pytest.raises(SpecError, match="Did you mean 'backward'"):
        square(inputs={"x": 3.0}, expected=6, methods=["backwards"])


def test_custom_protocol_is_for_backward_only():
    with pytest.raises(SpecError, match="applies to the 'backward' method only"):
        square(inputs={"x": 3.0}, expected=12, protocol=["forward", "backward", "forward", "backward"])


def test_expected_failure_needs_a_reason():
    with pytest.raises(SpecError, match="expect_why"):
        square(inputs={"x": 3.0}, expected=7, expect="fail")


def test_expected_error_regex_is_validated():
    with pytest.raises(SpecError, match="regular expression"):
        ExpectedError("RuntimeError", "([")

"""The pytest plugin, exercised in a separate pytest run."""

import subprocess
import sys
import textwrap


def test_fixture_marker_and_lazy_torch(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import sys
        import pytest

        def test_no_torch_until_used():
            assert "torch" not in sys.modules

        @pytest.mark.gradaudit(mode="full", seed=3)
        def test_marker_sets_defaults(gradaudit):
            import torch
            x = torch.rand(4, dtype=torch.float64, requires_grad=True)
            res = gradaudit.assert_gradients(lambda x: x.sin() * x, (x,))
            assert res.mode == "full" and res.ok

        def test_failure_is_an_assertion(gradaudit):
            import torch

            class Wrong(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return 3 * x * g  # d(x^2)/dx is 2x

            x = torch.rand(4, dtype=torch.float64, requires_grad=True)
            with pytest.raises(AssertionError, match="Mismatched elements"):
                gradaudit.assert_gradients(Wrong.apply, (x,))
    '''))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 passed" in res.stdout


def test_assert_module_and_audit_training_fail_the_test(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import pytest
        import torch

        class Doubled(torch.autograd.Function):  # forward x, backward 2 g: wrong by a factor 2
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return 2 * g

        class Broken(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(3, 2).double()

            def forward(self, x):
                return Doubled.apply(self.lin(x))

        def test_assert_module_fails_a_broken_module(gradaudit):
            x = torch.randn(4, 3, dtype=torch.float64)
            assert not gradaudit.check_module(Broken(), (x,)).ok  # the plain form returns the result
            with pytest.raises(AssertionError, match="lin.weight"):
                gradaudit.assert_module(Broken(), (x,))

        def test_assert_module_passes_a_correct_module(gradaudit):
            assert gradaudit.assert_module(torch.nn.Linear(3, 2).double(), (torch.randn(4, 3).double(),)).ok

        def test_audit_training_fails_on_a_forgotten_zero_grad(gradaudit):
            model = torch.nn.Linear(3, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            data = [(torch.randn(8, 3), torch.randn(8, 1))] * 3

            def step(batch):  # no opt.zero_grad(): gradients pile up
                loss = ((model(batch[0]) - batch[1]) ** 2).mean()
                loss.backward()
                opt.step()
                return loss.item()

            with pytest.raises(AssertionError, match="grad_accumulates"):
                gradaudit.audit_training(step, data, model=model, optimizer=opt)

        def test_audit_training_passes_a_correct_loop(gradaudit):
            model = torch.nn.Linear(3, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def step(batch):
                opt.zero_grad()
                loss = ((model(batch[0]) - batch[1]) ** 2).mean()
                loss.backward()
                opt.step()
                return loss.item()

            assert gradaudit.audit_training(step, [(torch.randn(8, 3), torch.randn(8, 1))] * 3, model=model,
                                            optimizer=opt).ok
    '''))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                          "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 passed" in res.stdout


def test_a_spec_error_in_a_test_shows_the_test_and_the_message_not_gradaudits_source(tmp_path):
    # a newcomer forgot requires_grad: pytest showed gradaudit's own _problem, _checked and check frames around the
    # message. The SpecError's frames are hidden; any other exception still shows them
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import torch

        def test_forgot_requires_grad(gradaudit):
            x = torch.randn(3, dtype=torch.float64)
            gradaudit.check(torch.sin, (x,))

        def test_forgot_it_without_the_fixture():
            import gradaudit as ga
            ga.check(torch.sin, (torch.randn(3, dtype=torch.float64),))
    '''))
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_user.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "2 failed" in res.stdout
    assert res.stdout.count("no input is a tensor with requires_grad=True") >= 2
    assert "def _problem" not in res.stdout and "def _checked" not in res.stdout and "api.py" not in res.stdout


def test_markers_merge_and_a_bad_option_is_named(tmp_path):
    # a module's marker (mode) and a test's (seed) merge, the closer winning; compare's own options reach compare only;
    # a positional argument and an option no helper takes fail the test's setup with a sentence, not silently (a
    # fresh-eyes audit: the module's mode was dropped, "directional" ignored, dtypes= broke assert_gradients)
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        import pytest
        import torch

        pytestmark = pytest.mark.gradaudit(mode="directional")

        def x():
            return torch.linspace(0.1, 0.9, 4, dtype=torch.float64).requires_grad_(True)

        @pytest.mark.gradaudit(seed=5)
        def test_merged(gradaudit):
            res = gradaudit.check(torch.sin, (x(),))
            assert res.mode == "directional" and "seed=5" in res.rerun

        @pytest.mark.gradaudit(mode="full")
        def test_closest_wins(gradaudit):
            assert gradaudit.check(torch.sin, (x(),)).mode == "full"

        @pytest.mark.gradaudit(dtypes=("float32",))
        def test_compare_options_stay_with_compare(gradaudit):
            assert gradaudit.assert_gradients(torch.sin, (x(),)).ok

        @pytest.mark.gradaudit("full")
        def test_positional(gradaudit):
            pass

        @pytest.mark.gradaudit(mdoe="full")
        def test_unknown(gradaudit):
            pass
    '''))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                          "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "3 passed, 2 errors" in res.stdout, out
    assert "takes keyword options only" in out and "got the positional argument(s) 'full'" in out
    assert "has option(s) no helper of the gradaudit fixture takes: mdoe" in out
    assert "Traceback" not in out

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

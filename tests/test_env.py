import torch

from gradaudit.env import environment
from gradaudit.render.facts import environment_lines as summary_lines


def test_block_has_the_facts():
    block = environment()
    assert block["torch"]["version"] == torch.__version__
    assert len(block["id"]) == 16
    for acc in block["accelerators"].values():
        assert {"compiled_with", "available", "devices", "ready", "ready_detail"} <= set(acc)


def test_id_is_stable_within_an_environment():
    assert environment()["id"] == environment()["id"]


def test_readiness_is_honest():
    cuda = environment()["accelerators"]["cuda"]
    if not (torch.version.cuda or torch.version.hip):
        assert cuda["compiled_with"] is None and cuda["ready"] is False
        assert "compiled without" in cuda["ready_detail"]
    elif not torch.cuda.is_available():
        assert cuda["ready"] is False and cuda["devices"] == []
    else:  # a machine with a GPU: ready means the probe matched the CPU
        assert cuda["ready"] is True and cuda["devices"]
    assert any(line.startswith("cuda: compiled with") for line in summary_lines(environment()))

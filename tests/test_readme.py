"""Every ```python block of the README runs as written, each in a fresh namespace, in-process."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.S | re.M)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, capsys):
    code = BLOCKS[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": f"readme_block_{index}"})
    out = capsys.readouterr().out
    # where a print line's comment says what it shows, the output shows it (the comment up to ": ")
    for line in code.splitlines():
        m = re.match(r"\s*print\(.*\)\s+#\s*(.+)$", line)
        if m:
            shown = m.group(1).split(": ")[0].strip()
            assert shown in out, (line, out)

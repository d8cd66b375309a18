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


def test_the_first_report_shown_is_what_the_first_block_prints(capsys):
    # the README leads with a located failure: the text shown under it is the block's output, line for line
    exec(compile(BLOCKS[0], "README.md python block 1", "exec"), {"__name__": "__main__"})  # as a script runs it
    shown = re.search(r"^```text\n(.*?)^```", README, flags=re.S | re.M)
    assert shown is not None
    assert capsys.readouterr().out == shown.group(1)


ROOT = Path(__file__).parent.parent
DOCS = {"README.md": README, "docs/history.md": (ROOT / "docs" / "history.md").read_text(encoding="utf-8")}


def _anchors(text):
    """The anchors a markdown page defines: explicit <a id="..."> and each heading's, as GitHub writes them
    (lower case, punctuation but '-' dropped, spaces as '-')."""
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.*)$", text, flags=re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", sorted(DOCS))
def test_every_link_of_the_docs_reaches_its_target(page):
    # the README's history moved to docs/history.md: a link to a section left behind on the other page, or to a
    # file that is not there, would read as a dead end
    base = (ROOT / page).parent
    links = re.findall(r"\]\(([^)\s]+)\)", DOCS[page])
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = (base / path).resolve() if path else (ROOT / page).resolve()
        assert target.exists(), (page, link)
        if anchor:
            name = target.relative_to(ROOT.resolve()).as_posix()
            assert name in DOCS, (page, link)
            assert anchor in _anchors(DOCS[name]), (page, link)

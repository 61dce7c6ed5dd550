"""The docs hold what runs: every snippet shown equals its file region, every relative link resolves, and the
connector of docs/writing-a-connector.md (``docs/examples/``) does what the page says on the SQLite backend.

Snippets: a fenced block right after ``<!-- snippet: <path from the repo root>#<name> -->`` must equal the region
between ``# [START <name>]`` and ``# [END <name>]`` of that file (Airflow's convention), dedented. The files shown
run elsewhere too: ``dags/*.py`` as system tests, ``docs/examples/`` here.
"""

from __future__ import annotations

import functools
import json
import re
import textwrap
from pathlib import Path

import pytest

from connect_runtime import run_sink, run_source
from connect_runtime.api import ConfigError
from tests.support import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
SNIPPET = re.compile(r"^<!-- snippet: (?P<path>[^#\s]+)#(?P<name>[\w.-]+) -->\n+```[\w-]*\n(?P<body>.*?)^```",
                     re.S | re.M)
MARKER = re.compile(r"^<!-- snippet:", re.M)
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def region(path: Path, name: str) -> str:
    """The dedented lines between ``# [START name]`` and ``# [END name]`` of ``path``."""
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"# [START {name}]"]
    ends = [i for i, line in enumerate(lines) if line.strip() == f"# [END {name}]"]
    assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], (
        f"{path.relative_to(REPO)} needs exactly one '# [START {name}]' before one '# [END {name}]'")
    return textwrap.dedent("\n".join(lines[starts[0] + 1:ends[0]])).strip("\n")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose(page: Path) -> str:
    """``page`` without its fenced code blocks (a ``#`` or a link inside code is neither a heading nor a link)."""
    return re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    return frozenset(slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", prose(page), re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_snippet_equals_its_file_region(page: Path) -> None:
    text = page.read_text()
    found = list(SNIPPET.finditer(text))
    assert len(found) == len(MARKER.findall(text)), (
        f"{page.relative_to(REPO)}: a snippet marker is not followed by a fenced block")
    for m in found:
        source = REPO / m.group("path")
        assert source.is_file(), f"{page.relative_to(REPO)}: snippet of a missing file {m.group('path')}"
        assert m.group("body").strip("\n") == region(source, m.group("name")), (
            f"{page.relative_to(REPO)}: the snippet {m.group('path')}#{m.group('name')} differs from the file")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    text = prose(page)
    broken = []
    for m in LINK.finditer(text):
        target = m.group("target")
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def test_the_docs_connector_resumes_and_its_sink_gets_each_line_once(tmp_path: Path) -> None:
    """docs/writing-a-connector.md's promises: the lines land, a second run resumes from the committed offsets
    and writes nothing twice, a line appended later is the only record of the next run, and the sink receives
    exactly the committed records, once each."""
    lines = tmp_path / "in.txt"
    lines.write_text("".join(f"line {i}\n" for i in range(230)))
    backend = f"sqlite:///{tmp_path / 'store.db'}"
    # [START run]
    source = {"name": "lines", "connector.class": "docs.examples.lines_source.LinesSource", "file": str(lines),
              "topic": "lines"}

    first = run_source(source, backend).to_dict()
    assert (first["records"], first["ranges"], first["transactions"]) == (230, {"lines": {"0": [0, 230]}}, 5)
    assert first["source_offsets"] == [{"partition": {"file": str(lines)}, "offset": {"line": 230}}]

    again = run_source(source, backend).to_dict()
    assert (again["records"], again["ranges"]) == (0, {})

    with lines.open("a") as f:
        f.write("appended\n")
    third = run_source(source, backend).to_dict()
    assert (third["records"], third["ranges"]) == (1, {"lines": {"0": [230, 231]}})

    out = tmp_path / "out.jsonl"
    sink = {"name": "lines-out", "connector.class": "docs.examples.jsonl_sink.JsonLinesSink", "topics": "lines",
            "file": str(out), "flush.records": "100"}
    delivered = run_sink(sink, backend, until_offsets=third).to_dict()
    assert delivered["committed"] == {"lines": {"0": 231}}
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["line"] for v in written] == list(range(1, 232))
    assert written[-1] == {"line": 231, "text": "appended"}
    assert run_sink(sink, backend, until_offsets=third).to_dict()["records"] == 0
    assert len(out.read_text().splitlines()) == 231
    # [END run]


def test_the_exactly_once_docs_connector_commits_where_it_asks(tmp_path: Path) -> None:
    """docs/writing-a-connector.md's exactly-once source: required support is accepted, a transaction ends every
    100 lines and at the end of the file, each written record is acknowledged (commit_record), and the plain
    LinesSource is refused under exactly.once.support=required (its support is unknown)."""
    lines = tmp_path / "in.txt"
    lines.write_text("".join(f"line {i}\n" for i in range(230)))
    backend = f"sqlite:///{tmp_path / 'store.db'}"
    # [START run-exactly-once]
    source = {"name": "lines", "connector.class": "docs.examples.transactional_lines_source.TransactionalLinesSource",
              "file": str(lines), "topic": "lines", "exactly.once.support": "required",
              "transaction.boundary": "connector", "lines.per.transaction": "100"}

    first = run_source(source, backend).to_dict()
    assert (first["records"], first["ranges"], first["transactions"]) == (230, {"lines": {"0": [0, 230]}}, 3)
    assert run_source(source, backend).to_dict()["records"] == 0  # resumed after line 230
    # [END run-exactly-once]
    plain = {**source, "connector.class": "docs.examples.lines_source.LinesSource"}
    with pytest.raises(ConfigError, match=r"exactly\.once\.support"):
        run_source(plain, f"sqlite:///{tmp_path / 'other.db'}")


def test_the_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """README.md's first code: the source commits its 1,000 records and the sink archives exactly those."""
    import runpy

    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(REPO / "docs" / "examples" / "quickstart.py"))
    assert '"records": 1000' in capsys.readouterr().out.replace("'", '"')
    archived = [line for f in sorted((tmp_path / "var" / "archive").rglob("*.jsonl")) for line in f.read_text().splitlines()]
    assert sorted(json.loads(line)["id"] for line in archived) == list(range(1000))

"""Config files (``connect_runtime.runtime.configfile``) and the CLI's argument handling in-process.

The CLI against a real backend, in real subprocesses, is in ``tests/integration/test_cli_commands.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_runtime.api import ConfigError
from connect_runtime.cli import main, validation_errors
from connect_runtime.runtime.configfile import load_config, parse_json_config, parse_properties

# ------------------------------------------------------------------------------------- .properties


def test_properties_separators_comments_and_blank_lines() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "name=files\n"
        "connector.class : connect_runtime.connectors.files.DirectorySource\n"
        "tasks.max 2\n"
        "   topic   =   events  \n"
        "empty=\n"
        "bare\n"
    )
    assert parse_properties(text) == {
        "name": "files",
        "connector.class": "connect_runtime.connectors.files.DirectorySource",
        "tasks.max": "2",
        "topic": "events  ",  # trailing blanks belong to the value, as in java.util.Properties
        "empty": "",
        "bare": "",
    }


def test_properties_continuation_lines_and_escapes() -> None:
    text = (
        "topics=a,\\\n"
        "       b,\\\n"
        "       c\n"
        "path=C:\\\\data\\\\in\n"
        "key\\=with\\:seps\\ and\\ space=v\n"
        "unicode=caf\\u00e9\\t!\n"
        "ends.with.escaped.backslash=x\\\\\n"
        "next=1\n"
        "# a comment ending in a backslash does not continue \\\n"
        "after=2\n"
    )
    assert parse_properties(text) == {
        "topics": "a,b,c",
        "path": "C:\\data\\in",
        "key=with:seps and space": "v",
        "unicode": "café\t!",
        "ends.with.escaped.backslash": "x\\",
        "next": "1",
        "after": "2",
    }


def test_properties_crlf_and_cr_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_properties_later_key_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_properties_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.properties"
    p.write_text("name=x\n\n# c\nvalue=\\u12G4\n")
    with pytest.raises(ConfigError, match=r"bad\.properties:4: malformed \\uXXXX escape"):
        load_config(p)
    p.write_text("name=x\n=novalue\n")
    with pytest.raises(ConfigError, match=r"bad\.properties:2: missing key"):
        load_config(p)
    p.write_bytes(b"name=x\nv=\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"bad\.properties:2: not valid UTF-8"):
        load_config(p)


def test_continuation_error_names_the_first_line_of_the_logical_line(tmp_path: Path) -> None:
    p = tmp_path / "c.properties"
    p.write_text("a=1\nb=x\\\n  \\uZZZZ\n")
    with pytest.raises(ConfigError, match=r"c\.properties:2:"):
        load_config(p)


# -------------------------------------------------------------------------------------------- JSON


def test_json_values_become_strings() -> None:
    text = ('{"name": "gen", "tasks.max": 2, "enabled": true, "ratio": 0.5, "topics": ["a", "b"],'
            ' "nested": {"x": [1, 2]}, "dropped": null}')
    assert parse_json_config(text) == {
        "name": "gen", "tasks.max": "2", "enabled": "true", "ratio": "0.5", "topics": "a,b",
        "nested": '{"x":[1,2]}',
    }


def test_json_kafka_connect_rest_shape() -> None:
    text = '{"name": "gen", "config": {"connector.class": "x.Y", "topic": "t"}}'
    assert parse_json_config(text) == {"connector.class": "x.Y", "topic": "t", "name": "gen"}


def test_json_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{\n  "name": "x",\n  "topic": \n}\n')
    with pytest.raises(ConfigError, match=r"bad\.json:4: invalid JSON at column 1"):
        load_config(p)
    p.write_text('["not", "an", "object"]')
    with pytest.raises(ConfigError, match=r"bad\.json:1: expected a JSON object"):
        load_config(p)
    p.write_text('{"a": 1, "a": 2}')
    with pytest.raises(ConfigError, match=r"'a' appears twice"):
        load_config(p)


def test_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read config file"):
        load_config(tmp_path / "nope.json")


def test_unknown_extension_is_sniffed(tmp_path: Path) -> None:
    (tmp_path / "a.conf.txt").write_text('{"a": 1}')
    (tmp_path / "b.txt").write_text("b=2\n")
    assert load_config(tmp_path / "a.conf.txt") == {"a": "1"}
    assert load_config(tmp_path / "b.txt") == {"b": "2"}


# ------------------------------------------------------------------------------------- CLI in-process


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["run"]) == 2
    assert main(["run", "x.json", "--max-records", "-1"]) == 2
    assert main(["--help"]) == 0


def test_validate_names_every_bad_field_of_a_directory_source(tmp_path: Path) -> None:
    errors = validation_errors({
        "name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
        "directory": str(tmp_path / "missing"), "batch.size": "zero", "format": "xml",
    })
    assert set(errors) >= {"directory", "batch.size", "format", "topic"}
    assert "existing directory" in errors["directory"]


def test_validate_unknown_class(tmp_path: Path) -> None:
    errors = validation_errors({"name": "x", "connector.class": "no.such.Connector"})
    assert "cannot be imported" in errors["connector.class"]

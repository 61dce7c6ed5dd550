"""DirectorySource's reading position in one file: whole lines only, from a committed byte offset, following
a file that grows; the text after its last newline waits until the file is final (``file.final.ms``).

:class:`_FileCursor` parses ``jsonl`` and ``csv`` lines one by one; :class:`_TextCursor` (``format=text``) splits
and decodes a chunk of lines at a time, nothing parsed."""

from __future__ import annotations

import csv
import io
import logging
import os
import time
from collections.abc import Mapping
from itertools import accumulate, count, islice
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import DataError
from connect_runtime.api.jsoncodec import json_loads_exact
from connect_runtime.api.records import SourceRecord
from connect_runtime.connectors.files._formats import csv_record_end, csv_row

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_BOM = b"\xef\xbb\xbf"
_BLANK = frozenset(b" \t\r\f\v")


def cursor(root: Path, name: str, fmt: str, offset: Mapping[str, Any] | None, final_ms: int) -> _FileCursor:
    """The cursor of one file of format ``fmt``, at its committed ``offset``."""
    c = (_TextCursor if fmt == "text" else _FileCursor)(root, name, fmt, offset)
    c.final_ms = final_ms
    return c


class _FileCursor:
    """Reading position in one file: whole lines only, from a committed byte offset."""

    def __init__(self, root: Path, name: str, fmt: str, offset: Mapping[str, Any] | None) -> None:
        self.name = name
        self.path = root / name
        self.fmt = fmt
        self.partition = {"file": name}
        self.position = int(offset.get("position", 0)) if offset else 0
        self.line = int(offset.get("line", 0)) if offset else 0
        self.header: list[str] | None = None
        self.error: SourceRecord | None = None
        """A malformed line, as the record the next poll hands to the runtime (value: the DataError)."""
        self.final_ms = 5000
        self.gone = False
        self._fh: io.BufferedReader | None = None
        self._buf = b""
        self._eof = False

    # -- file handling ------------------------------------------------------------------------------

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in close()
        except FileNotFoundError:
            log.warning("DirectorySource: %s disappeared; skipping it", self.path)
            self.gone = True
            return False
        size = os.fstat(fh.fileno()).st_size
        if size < self.position:
            log.warning("DirectorySource: %s is shorter (%d bytes) than its committed position %d: "
                        "it was replaced; reading it again from the start", self.path, size, self.position)
            self.position = 0
            self.line = 0
        if self.fmt == "csv" and self.position > 0 and self.header is None:
            self.header = self._read_header(fh)
        fh.seek(self.position + len(self._buf))
        self._fh = fh
        return True

    def _read_header(self, fh: io.BufferedReader) -> list[str]:
        fh.seek(0)
        data = b""
        while True:
            chunk = fh.read(65536)
            data += chunk
            start = 0
            while True:
                end = csv_record_end(data, start)
                if end < 0:
                    break
                text = data[start:end]
                if text.startswith(_BOM):
                    text = text[3:]
                if text.strip():
                    return csv_row(text)
                start = end + 1
            if not chunk:
                raise DataError(f"{self.path}: cannot re-read the CSV header to resume at byte {self.position}")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def has_more(self) -> bool:
        """Whether the file may have bytes this cursor has not seen (it grew since the last EOF), or an
        unterminated last line that became final."""
        if self.gone:
            return False
        if not self._eof:
            return True
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        if st.st_size != self.position + len(self._buf):
            return True
        return bool(self._buf if self.fmt == "text" else self._buf.strip()) and self._final(st.st_mtime)

    @property
    def at_end(self) -> bool:
        """Read to its end of file (it may still grow: :meth:`has_more`), or gone."""
        return self._eof or self.gone

    def _final(self, mtime: float) -> bool:
        """The file stopped changing: not modified for ``file.final.ms``."""
        return self.final_ms >= 0 and time.time() - mtime >= self.final_ms / 1000

    # -- reading ------------------------------------------------------------------------------------

    def read(self, limit: int, topic: str, key_field: str | None, out: list[SourceRecord]) -> int:
        """Append up to ``limit`` records to ``out``; stop early at EOF or before a malformed line
        (which is then left in ``self.error``, the cursor already past it)."""
        if self.gone or (self._fh is None and not self._open()):
            return 0
        fh = self._fh
        assert fh is not None
        csv_fmt = self.fmt == "csv"
        decode = json_loads_exact
        partition = self.partition
        buf = self._buf
        i = 0
        n = 0
        line = self.line
        last: dict[str, Any] | None = None
        base = self.position
        eof = False
        tail = False  # reading the unterminated last line of a final file
        while True:
            end = csv_record_end(buf, i) if csv_fmt else buf.find(b"\n", i)
            if end < 0:
                chunk = fh.read(_CHUNK)
                if chunk:
                    base += i
                    buf = buf[i:] + chunk
                    i = 0
                    continue
                if tail or i >= len(buf) or not buf[i:].strip() or not self._final(os.fstat(fh.fileno()).st_mtime):
                    eof = True
                    break
                tail = True
                end = len(buf)  # the file is final: its last line has no newline, read it as it is
            raw = buf[i:end]
            lines = raw.count(b"\n") + 1 if csv_fmt else 1
            if line == 0 and raw.startswith(_BOM):
                raw = raw[3:]
            # blank (or whitespace-only) lines are consumed without a record
            if not raw or (raw[0] in _BLANK and not raw.strip()):
                i = end + 1
                line += lines
                continue
            if n >= limit:
                break
            i = end + 1 if end < len(buf) else end  # a final file's unterminated last line ends at buf's end
            line_no = line + 1
            line += lines
            try:
                if csv_fmt:
                    row = csv_row(raw)
                    if self.header is None:
                        self.header = row
                        continue
                    if len(row) != len(self.header):
                        raise ValueError(f"expected {len(self.header)} fields as in the header, got {len(row)}")
                    value: Any = dict(zip(self.header, row, strict=True))
                else:
                    value = decode(raw)
            except (ValueError, csv.Error) as exc:
                kind = "CSV" if csv_fmt else "JSON"
                error = DataError(f"{self.path}: line {line_no}: malformed {kind}: {exc}")
                # the runtime decides (errors.tolerance): the line goes to it as a record of its own; it
                # finishes the file when only blank lines follow it
                rest = buf[i:]
                done = not rest.strip() and fh.tell() >= os.fstat(fh.fileno()).st_size
                offset = ({"position": base + len(buf), "line": line + rest.count(b"\n"), "done": True} if done
                          else {"position": base + i, "line": line, "done": False})
                self.error = SourceRecord(source_partition=partition, source_offset=offset, topic=topic,
                                          value=error)
                break
            last = {"position": base + i, "line": line, "done": False}
            key = value.get(key_field) if key_field and isinstance(value, dict) else None
            out.append(SourceRecord(source_partition=partition, source_offset=last,
                                    topic=topic, key=key, value=value))
            n += 1
        self.line = line
        self._buf = buf[i:]
        self.position = base + i
        self._eof = eof
        if eof:
            self.close()  # reopened by read() when has_more() says the file grew
        if last is not None and eof and not self._buf and self.error is None:
            # this record consumed the file to its end (blank lines after it included)
            last["position"] = self.position
            last["line"] = self.line
            last["done"] = True
        return n


class _TextCursor(_FileCursor):
    """format=text: every line is a record whose value is its text (UTF-8, without the newline and a
    ``\\r`` before it). Lines are split a chunk at a time (one ``split``), and a poll's lines decoded with
    one ``decode``; a line that is not UTF-8 is named like a malformed JSON line (``self.error``)."""

    def __init__(self, root: Path, name: str, fmt: str, offset: Mapping[str, Any] | None) -> None:
        super().__init__(root, name, fmt, offset)
        self._lines: list[bytes] = []
        """Complete lines read ahead (without their newline), from ``_li`` on not yet returned; ``_buf``
        then holds only the text after the last newline read."""
        self._li = 0

    def read(self, limit: int, topic: str, key_field: str | None, out: list[SourceRecord]) -> int:
        if self.gone or (self._fh is None and not self._open()):
            return 0
        fh = self._fh
        assert fh is not None
        n = 0
        eof = False
        while True:
            lines, li = self._lines, self._li
            if li >= len(lines):
                chunk = fh.read(_CHUNK)
                if chunk:
                    lines = (self._buf + chunk).split(b"\n")
                    self._buf = lines.pop()
                    self._lines, self._li = lines, 0
                    continue
                tail = self._buf
                if not tail or not self._final(os.fstat(fh.fileno()).st_mtime):
                    eof = True
                    break
                if n >= limit:
                    break
                # the file is final: its last line has no newline, it is read as it is
                self._buf = b""
                n += self._emit_text([tail], topic, out, newline=False)
                if self.error is not None:
                    break
                continue
            if n >= limit:
                break
            take = lines[li:li + limit - n]
            self._li = li + len(take)
            n += self._emit_text(take, topic, out, newline=True)
            if self.error is not None:
                break
        self._eof = eof
        if eof:
            self.close()  # reopened by read() when has_more() says the file grew
            self._lines, self._li = [], 0
            if n and self.error is None and not self._buf:
                last = out[-1].source_offset
                assert isinstance(last, dict)  # made by _emit_text
                last["done"] = True  # this record consumed the file to its end
        return n

    def _emit_text(self, lines: list[bytes], topic: str, out: list[SourceRecord], *, newline: bool) -> int:
        """Append the records of ``lines`` (whole lines, in order, from the cursor's position) to ``out``.
        A line that is not UTF-8 ends them: it becomes ``self.error`` (the cursor past it; what was read
        ahead after it is read again)."""
        if self.line == 0 and self.position == 0 and lines[0].startswith(_BOM):
            lines = [lines[0][3:], *lines[1:]]
            self.position = 3
        line, base = self.line, self.position
        try:
            text = b"\n".join(lines).decode("utf-8")
        except UnicodeDecodeError:
            good, why = 0, ""
            for raw in lines:  # find the bad line (the ones before it are records)
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    why = str(exc)
                    break
                good += 1
            n = self._emit_text(lines[:good], topic, out, newline=newline) if good else 0
            self.line += 1
            self.position += len(lines[good]) + newline
            self._lines, self._li, self._buf = [], 0, b""
            done = False
            if self._fh is not None:
                self._fh.seek(self.position)
                done = self.position >= os.fstat(self._fh.fileno()).st_size
            self.error = SourceRecord(
                source_partition=self.partition, topic=topic,
                source_offset={"position": self.position, "line": self.line, "done": done},
                value=DataError(f"{self.path}: line {self.line}: not UTF-8 text (format=text): {why}"))
            return n
        values = text.split("\n")
        if "\r" in text:
            values = [v[:-1] if v.endswith("\r") else v for v in values]
        ends = list(accumulate(map(len, lines), _line_end, initial=base))
        if not newline:
            ends[-1] -= 1
        partition = self.partition
        new, SR = object.__new__, SourceRecord
        append = out.append
        # records made with plain attribute stores: about twice as fast as SourceRecord(**fields), the same records
        for value, end, no in zip(values, islice(ends, 1, None), count(line + 1)):
            r = new(SR)
            r.source_partition = partition
            r.source_offset = {"position": end, "line": no, "done": False}
            r.topic = topic
            r.partition = r.key = r.timestamp = r.headers = None
            r.value = value
            append(r)
        self.line = line + len(values)
        self.position = ends[-1]
        return len(values)


def _line_end(position: int, length: int) -> int:
    return position + length + 1


__all__ = ["cursor"]

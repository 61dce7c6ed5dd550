"""The source connector of docs/writing-a-connector.md: a text file's lines into a topic, resumable.

The whole of a source with offsets and resume: its source partition is the file, its offset the number of lines
read, so a second run resumes after the last committed line. ``transactional_lines_source.py`` adds what
exactly-once asks of a connector. Public ``connect_runtime.api`` names only.
"""

from __future__ import annotations

# [START source]
from collections.abc import Mapping

from connect_runtime.api import ConfigDef, SourceConnector, SourceRecord, SourceTask, Type

CONFIG = (ConfigDef()
          .define("file", Type.STRING, doc="The text file to read, one record per line.")
          .define("topic", Type.STRING, doc="The topic to write the lines to."))


class LinesSource(SourceConnector):
    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return LinesTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.props]  # one file: one task


class LinesTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = CONFIG.parse(props)
        self.topic, self.partition = values["topic"], {"file": values["file"]}
        committed = self.context.offset_storage_reader.offset(self.partition)
        self.line = committed["line"] if committed else 0  # resume after the last committed line
        with open(values["file"]) as f:
            self.lines = f.read().splitlines()

    def poll(self) -> list[SourceRecord] | None:
        batch = self.lines[self.line:self.line + 50]
        records = [SourceRecord(source_partition=self.partition, source_offset={"line": n}, topic=self.topic,
                                value={"line": n, "text": text}) for n, text in enumerate(batch, self.line + 1)]
        self.line += len(records)
        return records or None
# [END source]

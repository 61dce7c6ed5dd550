"""``pyconnect``: run connectors standalone and look at topics and offsets from a shell.

::

    pyconnect [--backend URL] [--setting KEY=VALUE ...] [-v] [--debug] COMMAND

    run CONFIG [--at-least-once] [--max-records N] [--max-seconds S] [--until JSON|@FILE]
        one bounded run (like connect-standalone); a SourceConnector config runs run_source, a
        SinkConnector config runs run_sink. Progress on stderr, the result JSON on stdout.
    validate CONFIG                     OK, or every bad field (exit 1); unknown keys are listed as
                                        warnings (with a did-you-mean), which do not fail validation
    validate DAG_FILE.py [--date D]     the same for every pyconnect task of a DAG file, without running
                                        it (needs Airflow; templates rendered for a sample run on D)
    offsets get CONNECTOR               KIP-875's {"offsets": [{"partition": ..., "offset": ...}]}: a
                                        source's offsets (its own store, then the global one) or a
                                        sink group's {"kafka_topic", "kafka_partition"}/{"kafka_offset"}
    offsets set CONNECTOR --partition JSON --offset JSON
                                        KIP-875: a source partition's offset (null deletes it), or a
                                        sink partition {"kafka_topic": T, "kafka_partition": P} with
                                        {"kafka_offset": N} (null: back to the beginning)
                                        A CONNECTOR name with no run in the store and no offsets
                                        stored under it is an error (exit 1, as Kafka Connect's 404
                                        "Connector X not found"); its config file works before its
                                        first run, also with a connector.class not on this machine
                                        (a Kafka Connect connector sharing the offsets topic)
    offsets reset CONNECTOR             delete every source offset; sink group back to the beginning
                                        (set and reset are refused while a run holds the connector,
                                        and start a new generation: an older run can no longer commit)
                                        A sink that keeps its offsets in its destination (FileSink,
                                        SqlSink) has them read and changed there: give its config file
                                        as CONNECTOR (without it, get shows what its last run recorded
                                        and set/reset are refused, saying so)
    topics list                         every topic and its partition count
    topics read TOPIC [--from-beginning] [--max N] [--partition P]
                                        JSON lines of topic/partition/offset/key/value

The backend is ``--backend``, else ``$PYCONNECT_BACKEND``, else ``sqlite:///pyconnect.db``. The
read-only commands (``offsets get``, ``topics list``, ``topics read``) open it read-only: a SQLite
path that names no file is an error (nothing is created), and a file the user may only read works.
Exit codes: 0 ok, 1 failure, 2 usage. A failure is one line ``error: ...`` on stderr (``--debug``
adds the traceback); secrets are masked wherever a config is printed.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.runtime.worker import CONFIG_LOGGER
from connect_runtime.secrets import mask_config, secret_values, url_passwords
from connect_runtime.validation import connector_kind, validation_errors, validation_warnings

DEFAULT_BACKEND = "sqlite:///pyconnect.db"
PROGRESS_LOGGER = "connect_runtime.runtime.progress"
"""The logger of the runtime's progress lines (:mod:`connect_runtime.runtime.progress`), shown without ``-v``."""
BACKEND_ENV = "PYCONNECT_BACKEND"
_TIMEOUT = 30.0


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage + exit; we want one line, code 2
        raise UsageError(f"{self.prog}: {message}")


# --------------------------------------------------------------------------------------- helpers


def _out(obj: Any, stream: IO[str] | None = None) -> None:
    print(json.dumps(obj, ensure_ascii=False, default=str), file=stream or sys.stdout, flush=True)


def _json_arg(text: str, what: str) -> Any:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {text[1:]}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc}): {text[:80]!r}") from exc


def _settings(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--setting expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _secrets(config: Mapping[str, Any]) -> list[str]:
    """Secret values of a config (``Type.PASSWORD`` fields of its plugins, secret-looking names)."""
    return secret_values(config)


def _redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` without the given secret values (3 characters or more) nor any URL's password."""
    from connect_runtime.secrets import scrub

    return scrub(text, [s for s in secrets if len(s) >= 3])


def _decode(data: bytes | None) -> Any:
    """Bytes of a record key/value as printable JSON: parsed JSON, else text, else base64."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _load(path: str) -> dict[str, str]:
    from connect_runtime.runtime.configfile import load_config

    return load_config(path)


_LOG_SECRETS: list[str] = []
"""Secret values the log handler of :func:`main` masks (the command's config and backend settings)."""


class _ScrubbingFormatter(logging.Formatter):
    """Log lines without the command's secret values nor any URL's password (as Airflow's masker does)."""

    def format(self, record: logging.LogRecord) -> str:
        return _redact(super().format(record), _LOG_SECRETS)


class _Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.backend_url: str = args.backend or os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND
        self.settings = _settings(args.setting or [])
        self._secrets: list[str] = []
        self.secrets = []

    @property
    def secrets(self) -> list[str]:
        """The config's secret values and the backend settings' (masked in output, errors and log lines)."""
        return self._secrets

    @secrets.setter
    def secrets(self, values: Sequence[str]) -> None:
        self._secrets = list(dict.fromkeys([*values, *secret_values(self.settings), *url_passwords(self.backend_url)]))
        _LOG_SECRETS[:] = self._secrets

    def open(self, *, read_only: bool = False) -> Any:
        from connect_runtime.backends import open_backend

        return open_backend(self.backend_url, self.settings, read_only=read_only)


# -------------------------------------------------------------------------------------- commands


def cmd_run(ctx: _Context) -> int:
    a = ctx.args
    config = _load(a.config)
    ctx.secrets = _secrets(config)
    kind = connector_kind(config)
    logging.getLogger(__name__).info("running %s connector: %s", kind, json.dumps(mask_config(config)))
    if kind == "source":
        if a.until is not None:
            raise UsageError("--until applies to sink connectors only")
        from connect_runtime.runtime.source import run_source

        result: Any = run_source(config, ctx.backend_url, exactly_once=not a.at_least_once,
                                 max_records=a.max_records, max_seconds=a.max_seconds,
                                 backend_settings=ctx.settings)
    else:
        if a.at_least_once:
            raise UsageError("--at-least-once applies to source connectors only")
        from connect_runtime.runtime.sink import run_sink

        until = None if a.until is None else _json_arg(a.until, "--until")
        result = run_sink(config, ctx.backend_url, until_offsets=until, max_records=a.max_records,
                          max_seconds=a.max_seconds, backend_settings=ctx.settings)
    _out(result.to_dict())
    return 0


def cmd_validate(ctx: _Context) -> int:
    if Path(ctx.args.config).suffix == ".py":  # a DAG file: every pyconnect task's config (cli_validate)
        from connect_runtime.cli_validate import validate_dag_file

        return validate_dag_file(ctx.args.config, ctx.args.date)
    if ctx.args.date:
        raise UsageError("--date applies to a DAG file (.py) only")
    config = _load(ctx.args.config)
    ctx.secrets = _secrets(config)
    errors = validation_errors(config)
    warnings = validation_warnings(config)
    if not errors:
        print("OK")
    else:
        print(f"invalid: {len(errors)} field{'s' if len(errors) != 1 else ''}")
        for name, why in errors.items():
            print(_redact(f"  {name}: {why}", ctx.secrets))
    for why in warnings.values():
        print(_redact(f"  warning: {why}", ctx.secrets))
    if not errors and ctx.args.verbose:
        _out(mask_config(config))
    return 1 if errors else 0


def cmd_offsets(ctx: _Context) -> int:
    """KIP-875 through :mod:`connect_runtime.admin`: the connector's own offsets store (from the registry, a
    config file or ``--offsets-store``) with the global store as fallback; ``set``/``reset`` refused while a
    run holds the connector, and they start a new generation so an older run can no longer commit."""
    from connect_runtime import admin

    a = ctx.args
    name, store_name = a.connector, a.offsets_store
    kind: str | None = None
    config: dict[str, str] | None = None
    if Path(name).suffix.lower() in (".json", ".properties") and Path(name).is_file():
        # a connector config file: its name, its kind and its own offsets store, if it has one
        config = _load(name)
        if not config.get("name"):
            raise ConfigError(errors={"name": f"missing required field in {name}"})
        name = config["name"]
        kind = admin.config_kind(config)  # None: a class not on this machine (Kafka Connect's): offsets are data
        store_name = store_name or config.get("offsets.storage.topic") or None
    try:
        return _offsets(ctx, name, kind, store_name, config)
    except admin.ConnectorNotFound as exc:  # Kafka Connect: 404 "Connector X not found"; exit 1
        exc.args = (f"{exc}; to {'read' if a.offsets_command == 'get' else 'set'} the offsets of a connector "
                    "before its first run, give its config file as CONNECTOR",)
        raise


def _offsets(ctx: _Context, name: str, kind: str | None, store_name: str | None,
             config: dict[str, str] | None) -> int:
    from connect_runtime import admin

    a = ctx.args
    with ctx.open(read_only=a.offsets_command == "get") as backend:
        if a.offsets_command == "get":
            _out(admin.get_offsets(backend, name, kind=kind, offsets_store=store_name, config=config))
            return 0
        if a.offsets_command == "set":
            partition = _json_arg(a.partition, "--partition")
            offset = _json_arg(a.offset, "--offset")
            if not isinstance(partition, dict):
                raise UsageError("--partition must be a JSON object")
            if offset is not None and not isinstance(offset, dict):
                raise UsageError("--offset must be a JSON object or null")
            if set(partition) == {"kafka_topic", "kafka_partition"} and offset is not None and (
                    set(offset) != {"kafka_offset"} or not isinstance(offset["kafka_offset"], int)):
                raise UsageError('a sink partition takes --offset \'{"kafka_offset": N}\' or null')
            done = admin.alter_offsets(backend, name, [{"partition": partition, "offset": offset}], kind=kind,
                                       offsets_store=store_name, config=config)
            out = {"connector": name, "partition": partition, "offset": offset}
            if done.get("in") == "destination":
                out.update({"in": "destination", "where": done["where"]})
            _out(out)
            return 0
        _out(admin.reset_offsets(backend, name, kind=kind, offsets_store=store_name, config=config))
        return 0


def cmd_topics(ctx: _Context) -> int:
    from connect_runtime.api.records import TopicPartition

    a = ctx.args
    with ctx.open(read_only=True) as backend:
        topics = backend.list_topics()
        if a.topics_command == "list":
            for topic in sorted(topics):
                _out({"topic": topic, "partitions": topics[topic]})
            return 0
        if a.topic not in topics:
            raise ConnectError(f"topic {a.topic!r} does not exist (topics: {', '.join(sorted(topics)) or 'none'})")
        if a.partition is not None and not 0 <= a.partition < topics[a.topic]:
            raise ConnectError(f"topic {a.topic!r} has partitions 0..{topics[a.topic] - 1}, not {a.partition}")
        parts = [a.partition] if a.partition is not None else range(topics[a.topic])
        tps = [TopicPartition(a.topic, p) for p in parts]
        consumer = backend.consumer(None)
        try:
            begin = consumer.beginning_offsets(tps, _TIMEOUT)
            end = consumer.end_offsets(tps, _TIMEOUT)
        finally:
            consumer.close()
        limit = a.max if a.max is not None else (None if a.from_beginning else 10)
        printed = 0
        for tp in tps:
            if limit is not None and printed >= limit:
                break
            start = begin[tp] if a.from_beginning or limit is None else max(begin[tp], end[tp] - limit)
            stop = end[tp] if limit is None else min(end[tp], start + (limit - printed))
            for rec in backend.read_range(tp, start, stop):
                entry = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                         "timestamp": rec.timestamp, "key": _decode(rec.key), "value": _decode(rec.value)}
                if rec.headers:
                    entry["headers"] = [[k, _decode(v)] for k, v in rec.headers]
                _out(entry)
                printed += 1
        return 0


# ------------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pyconnect", description="Run connectors standalone; inspect topics and offsets.")
    p.add_argument("--backend", help=f"backend URL (default: ${BACKEND_ENV} or {DEFAULT_BACKEND})")
    p.add_argument("--setting", action="append", metavar="KEY=VALUE",
                   help="backend client setting (repeatable), e.g. busy.timeout.ms=10000")
    p.add_argument("-v", "--verbose", action="store_true", help="log what the runtime does (stderr)")
    p.add_argument("--debug", action="store_true", help="debug logs, and a traceback on failure")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a connector once, bounded (standalone mode)")
    run.add_argument("config", help="connector config (.json or .properties)")
    run.add_argument("--at-least-once", action="store_true", help="source: no transactions")
    run.add_argument("--max-records", type=int, metavar="N", help="stop after N records")
    run.add_argument("--max-seconds", type=float, metavar="S", help="stop after S seconds")
    run.add_argument("--until", metavar="JSON|@FILE",
                     help="sink: target offsets {topic: {partition: offset}} or a source run's result JSON")
    run.set_defaults(handler=cmd_run)

    val = sub.add_parser("validate", help="check a connector config, or every one of a DAG file; print OK or "
                                          "every bad field")
    val.add_argument("config", help="connector config (.json or .properties) or a DAG file (.py)")
    val.add_argument("--date", metavar="YYYY-MM-DD",
                     help="DAG file: the sample run templates are rendered for (default: today, UTC)")
    val.set_defaults(handler=cmd_validate)

    off = sub.add_parser("offsets", help="committed offsets of a connector (KIP-875 style)")
    off_sub = off.add_subparsers(dest="offsets_command", required=True, parser_class=_Parser)
    for name, help_ in (("get", "print committed offsets"), ("set", "set one partition's offset"),
                        ("reset", "delete source offsets; sink group back to the beginning")):
        sp = off_sub.add_parser(name, help=help_)
        sp.add_argument("connector", help="connector name (or its .json/.properties config file)")
        sp.add_argument("--offsets-store", default=None, metavar="NAME",
                        help="the connector's offsets.storage.topic, if it has its own")
        if name == "set":
            sp.add_argument("--partition", required=True, metavar="JSON",
                            help='source partition, or {"kafka_topic": T, "kafka_partition": P} for a sink')
            sp.add_argument("--offset", required=True, metavar="JSON",
                            help='source offset, {"kafka_offset": N} for a sink, or null to delete/reset')
        sp.set_defaults(handler=cmd_offsets)

    top = sub.add_parser("topics", help="list or read topics")
    top_sub = top.add_subparsers(dest="topics_command", required=True, parser_class=_Parser)
    top_sub.add_parser("list", help="every topic and its partition count").set_defaults(handler=cmd_topics)
    rd = top_sub.add_parser("read", help="print records as JSON lines")
    rd.add_argument("topic")
    rd.add_argument("--from-beginning", action="store_true",
                    help="start at the first record (default: the last --max records)")
    rd.add_argument("--max", type=int, metavar="N", help="print at most N records (default 10, or all "
                                                          "with --from-beginning)")
    rd.add_argument("--partition", type=int, metavar="P", help="only this partition")
    rd.set_defaults(handler=cmd_topics)
    return p


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {_one_line(str(exc))} (see pyconnect --help)", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    for flag in ("max_records", "max_seconds", "max"):
        value = getattr(args, flag, None)
        if value is not None and value < 0:
            print(f"error: --{flag.replace('_', '-')} must be at least 0, got {value}", file=sys.stderr)
            return 2
    # quiet by default: a failure is one ``error:`` line, not the runtime's log lines too
    # (config warnings excepted: an unknown key is shown without -v, as ``warning: ...``; and the progress lines
    # of a long run, every progress.interval.ms: ``progress: ...``)
    level = logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.CRITICAL + 1
    root = logging.getLogger()
    saved_level = root.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ScrubbingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(level)
    config_log = logging.getLogger(CONFIG_LOGGER)
    quiet = level > logging.WARNING
    warnings_handler = logging.StreamHandler(sys.stderr)
    warnings_handler.setFormatter(_ScrubbingFormatter("warning: %(message)s"))
    warnings_handler.setLevel(logging.WARNING)
    progress_log = logging.getLogger(PROGRESS_LOGGER)
    progress_handler = logging.StreamHandler(sys.stderr)
    progress_handler.setFormatter(_ScrubbingFormatter("%(message)s"))
    if quiet:
        config_log.addHandler(warnings_handler)
        config_log.setLevel(logging.WARNING)
        progress_log.addHandler(progress_handler)
        progress_log.setLevel(logging.INFO)
    try:
        return _dispatch(args)
    finally:
        root.removeHandler(handler)
        root.setLevel(saved_level)
        if quiet:
            config_log.removeHandler(warnings_handler)
            config_log.setLevel(logging.NOTSET)
            progress_log.removeHandler(progress_handler)
            progress_log.setLevel(logging.NOTSET)
        _LOG_SECRETS.clear()


def _dispatch(args: argparse.Namespace) -> int:
    ctx: _Context | None = None
    try:
        ctx = _Context(args)
        rc: int = args.handler(ctx)
        return rc
    except UsageError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `pyconnect topics read ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's final flush
        except OSError:
            pass
        return 0
    except (ConnectError, OSError) as exc:
        _fail(exc, args, ctx)
        return 1
    except Exception as exc:
        _fail(exc, args, ctx, unexpected=True)
        return 1


def _fail(exc: BaseException, args: argparse.Namespace, ctx: _Context | None, unexpected: bool = False) -> None:
    if isinstance(exc, OSError) and exc.strerror:
        message = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        message = str(exc) or type(exc).__name__
    if unexpected:
        message = f"unexpected {type(exc).__name__}: {message}"
    message = _redact(_one_line(message), ctx.secrets if ctx else [])
    if args.debug:
        traceback.print_exception(exc, file=sys.stderr)
    elif unexpected:
        message += " (run with --debug for the traceback)"
    print(f"error: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

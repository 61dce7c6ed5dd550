#!/usr/bin/env python3
"""Deterministic sample order files for the example pipeline.

Writes ``<out>/<YYYY-MM-DD>/orders-<NN>.jsonl`` for ``--days`` days starting at ``--start``, each day
split into ``--files`` files, one JSON order per line::

    {"order_id": "2026-01-01-00001", "customer": "c007", "amount": 42.5, "items": 3,
     "ts": "2026-01-01T08:13:05Z", "channel": "web"}

The same arguments always give byte-identical files (a seeded generator per day), so the totals a
test computes from the files are known in advance. Amounts have two decimals; sum them as decimals.
Files are written to a temporary name and renamed, so a reader never sees half a file; existing
files with the right content are left untouched (their size and mtime stay).

    .venv/bin/python scripts/generate_sample_data.py --out var/data/orders --days 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import date, datetime, timedelta
from pathlib import Path

CUSTOMERS = 25
CHANNELS = ("web", "app", "store")


def orders_of_day(day: date, per_day: int) -> list[dict[str, object]]:
    """The orders of one day (deterministic: the generator is seeded with the date)."""
    rng = random.Random(f"orders-{day.isoformat()}")
    start = datetime(day.year, day.month, day.day, 6, 0, 0)
    seconds = sorted(rng.randrange(0, 16 * 3600) for _ in range(per_day))
    out = []
    for i, sec in enumerate(seconds, start=1):
        cents = rng.randrange(199, 25_000)
        out.append({
            "order_id": f"{day.isoformat()}-{i:05d}",
            "customer": f"c{rng.randrange(1, CUSTOMERS + 1):03d}",
            "amount": round(cents / 100, 2),
            "items": rng.randrange(1, 8),
            "ts": (start + timedelta(seconds=sec)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "channel": rng.choice(CHANNELS),
        })
    return out


def per_day_count(day: date, base: int) -> int:
    """A few hundred records a day, varying by day so per-day numbers are told apart."""
    return base + (day.toordinal() * 37) % 101


def write_day(out: Path, day: date, per_day: int, files: int) -> list[Path]:
    """Write one day's files; returns their paths."""
    orders = orders_of_day(day, per_day)
    folder = out / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(files):
        chunk = orders[n::files]
        data = "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in chunk).encode()
        path = folder / f"orders-{n:02d}.jsonl"
        if not (path.exists() and path.read_bytes() == data):
            tmp = folder / f".{path.name}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, path)
        paths.append(path)
    return paths


def generate(out: Path, start: date, days: int, base: int = 300, files: int = 3) -> dict[str, int]:
    """Write ``days`` days of orders; returns records per day (``YYYY-MM-DD`` -> count)."""
    counts = {}
    for d in range(days):
        day = start + timedelta(days=d)
        n = per_day_count(day, base)
        write_day(out, day, n, files)
        counts[day.isoformat()] = n
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("var/data/orders"), help="output directory")
    parser.add_argument("--start", type=date.fromisoformat, default=date(2026, 1, 1), help="first day (YYYY-MM-DD)")
    parser.add_argument("--days", type=int, default=3, help="number of days")
    parser.add_argument("--per-day", type=int, default=300, help="base number of orders per day (+0..100)")
    parser.add_argument("--files", type=int, default=3, help="files per day")
    args = parser.parse_args(argv)
    if args.days < 1 or args.per_day < 1 or args.files < 1:
        parser.error("--days, --per-day and --files must be at least 1")
    counts = generate(args.out, args.start, args.days, args.per_day, args.files)
    for day, n in counts.items():
        print(f"{day}: {n} orders in {args.files} files under {args.out / day}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

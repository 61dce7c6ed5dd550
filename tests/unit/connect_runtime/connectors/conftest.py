"""Fixtures of the connector unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest


@pytest.fixture(params=["file", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A lake's root URL: a local directory, then an fsspec ``memory://`` one (removed afterwards)."""
    if request.param == "file":
        yield f"file://{tmp_path / 'lake'}"
    else:
        url = f"memory://lake-{uuid.uuid4().hex[:8]}"
        yield url
        fs = fsspec.filesystem("memory")
        if fs.exists(url):
            fs.rm(url, recursive=True)

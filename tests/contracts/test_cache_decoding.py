"""The :class:`service.ports.SnapshotCache` contract on every backend (in memory, fakeredis, the
real Redis, a local Redis Cluster), continued: what a cache holds is checked before it is trusted.
Corrupt, foreign and cut-short values decode to nothing (a miss, overwritten by the next write), a
value without checksums is checked whole, a trace is kept as checked bytes and parsed only when asked,
a result that does not fit its token counts is served whole but never sliced, and freshness needs
both the soft TTL and the running configuration.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Any

import orjson
import pytest
import zstandard

from graphrag.wiki.focus.context import Trace, cut
from graphrag.wiki.focus.render import result_json
from graphrag.wiki.focus.strategy import replay_json
from service.decoding import decode_envelope
from service.envelope import Envelope, SnapshotKey, is_fresh
from tests.contracts.backends import SOFT_TTL_S
from tests.contracts.cache_contract import CacheContract, envelope, wf, write
from tests.redis.readers import snapshot_of
from tests.support import NOW_MS
from tests.wiki_support import one_notebook, trace_of


class DecodingContract(CacheContract):
    """Decoding and freshness, on every backend."""

    # -- decoding ---------------------------------------------------------------------------------
    def test_corrupt_and_foreign_bytes_decode_to_none(self, store: Any) -> None:
        good = envelope(1, 0, [2]).to_json()
        bad: list[Any] = [
            b"", b"\xff\xfe\x00", b"not json", b"[]", b"null", b"42", b'{"schema": 1}',
            orjson.dumps({**good, "schema": 2}), orjson.dumps({**good, "schema": True}),
            orjson.dumps({k: v for k, v in good.items() if k != "result"}),
            orjson.dumps({**good, "dependsOn": ["1"]}), orjson.dumps({**good, "noteId": 1.5}),
            *(orjson.dumps({**good, "dependsOn": facts}) for facts in (
                ["note:1", "links"], ["note:1", 2], [2, "note:1"], ["note\n:1"], [True], "note:1",
                ["note:1", None])),  # a fact without its kind, mixed types, not a list
            orjson.dumps({**good, "result": {"focusNote": [], "relatedNotes": []}}),
            orjson.dumps({**good, "resultCrc32": "0"}),
            orjson.dumps({"result": good["result"]} | good),  # the result is not the last member
            orjson.dumps(good).replace(b'"/n2"', b'"/n3"'),  # a result its checksum does not match
            orjson.dumps(good)[:-2] + b"}",  # cut short
        ]
        assert [data for data in bad if decode_envelope(data) is not None] == []
        assert decode_envelope(orjson.dumps(good)) == envelope(1, 0, [2])
        for data in bad[:3]:
            self.backend.plant(wf(1), data)
            assert snapshot_of(store, 1, "wavefront", 0) is None
        assert write(store, envelope(1, 0, [2]))  # and gets overwritten
        assert snapshot_of(store, 1, "wavefront", 0) == envelope(1, 0, [2])

    def test_a_value_without_a_checksum_is_checked_whole(self, store: Any) -> None:
        good = {k: v for k, v in envelope(1, 0, [2]).to_json().items() if k != "resultCrc32"}
        assert decode_envelope(orjson.dumps(good)) == envelope(1, 0, [2])
        for bad in ({**good, "result": {"focusNote": [], "relatedNotes": []}},
                    {**good, "relatedTokens": [1, 2, 3]}):
            assert decode_envelope(orjson.dumps(bad)) is None

    def test_a_trace_is_kept_packed_and_inflated_only_when_asked(self, store: Any) -> None:
        env = _traced()
        data = env.encode()
        header, _, stream = data.partition(b"\n")
        split = orjson.loads(header)["resultFrameBytes"]
        assert zstandard.ZstdDecompressor().decompress(stream[:split]) == env.result_json
        got = decode_envelope(data)
        assert got is not None and got.packed is not None and got.trace_json is None
        assert "trace_bytes" not in got.__dict__  # the trace was not inflated by decoding
        assert got == env and got.trace == Trace.from_bytes(env.trace_bytes or b"")
        assert got.trace is not None and got.to_json()["trace"] == got.trace.to_json()
        assert replay_json(got.trace, 100) == result_json(cut(_TRACE, 100))

    def test_a_trace_that_does_not_parse_as_one_is_no_trace(self, store: Any) -> None:
        for junk in (b'{"format":2}\nabc', b'{"format":9}', b"[1,2]", b"{}", b"not json"):
            env = replace(_traced(), trace_json=junk)
            got = decode_envelope(env.encode())
            assert got is not None and got.trace_bytes == junk and got.trace is None
            assert got.result_json == env.result_json

    def test_a_value_packed_as_before_is_still_read(self, store: Any) -> None:
        env = _legacy_traced()  # one zlib stream of the result and the trace's JSON form
        header = orjson.loads(env.encode().partition(b"\n")[0])
        fields = header | {"packing": "zlib"}
        del fields["resultFrameBytes"]
        stream = zlib.compress(env.result_json + (env.trace_bytes or b""), 3)
        got = decode_envelope(orjson.dumps(fields) + b"\n" + stream)
        assert got is not None and got == env and got.trace == _PLAIN_TRACE
        assert decode_envelope(orjson.dumps(fields) + b"\n" + stream[:-4]).trace is None  # type: ignore[union-attr]

    def test_a_header_of_any_length_is_found(self, store: Any) -> None:
        many = tuple(f"links:{i}" for i in range(2_000))  # a hub's facts: a header of tens of KB
        env = replace(_traced(), depends_on=many)
        assert len(env.encode().partition(b"\n")[0]) > 20_000
        assert decode_envelope(env.encode()) == env
        self.backend.plant(SnapshotKey(1, "focus-context", None), env.encode())
        assert decode_envelope(store.read(SnapshotKey(1, "focus-context", None))) == env

    def test_a_packed_value_is_checked_against_its_header(self, store: Any) -> None:
        env = _traced()
        header, _, stream = env.encode().partition(b"\n")
        fields = orjson.loads(header)

        def packed(**changes: Any) -> bytes:
            return orjson.dumps(fields | changes) + b"\n" + stream
        split = fields["resultFrameBytes"]
        bad = [
            _flip(header, stream, split - 1),  # the result frame's content checksum
            _flip(header, stream, split // 2), packed(resultBytes=fields["resultBytes"] + 1),
            packed(packing="brotli"), packed(traceCrc32=None), packed(resultTokenLimit=None),
            packed(schema=2), packed(resultBytes=2**63), packed(traceBytes=2**64 - 1),
            packed(resultCrc32=2**32 + fields["resultCrc32"]),
            header + b"\n" + stream[:8], header + b"\n" + b"not zstd",
            b"{" + b"\n" + stream, header[:-1] + b"\n" + stream,
            packed(resultFrameBytes=None), packed(resultFrameBytes=0),
            packed(resultFrameBytes=fields["resultFrameBytes"] - 1),
            packed(resultFrameBytes=len(stream) + 1), packed(packing="zlib"),
        ]
        assert [d for d in bad if decode_envelope(d) is not None] == []
        # the trace is checked when it is inflated (its frame's content checksum, at its end; its
        # length): a bad one is no trace, while the result still reads
        for data in (_flip(header, stream, len(stream) - 1), header + b"\n" + stream[:-4],
                     _flip(header, stream, (split + len(stream)) // 2)):
            odd = decode_envelope(data)
            assert odd is not None and odd.traced and odd.trace_bytes is None and odd.trace is None
            assert odd.result_json == env.result_json

    def test_frames_without_a_content_checksum_are_checked_against_the_header(
            self, store: Any) -> None:
        # (as the versions before frame checksums wrote them)
        env = _traced()
        header, _, _ = env.encode().partition(b"\n")
        fields = orjson.loads(header)
        result, trace = env.result_json, env.trace_bytes or b""
        first = zstandard.ZstdCompressor(level=3).compress(result)
        against = zstandard.ZstdCompressionDict(result, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        second = zstandard.ZstdCompressor(level=3, dict_data=against).compress(trace)
        assert not zstandard.get_frame_parameters(second).has_checksum

        def packed(**changes: Any) -> bytes:
            return (orjson.dumps(fields | {"resultFrameBytes": len(first)} | changes) + b"\n"
                    + first + second)
        got = decode_envelope(packed())
        assert got == env and got is not None and got.trace == env.trace
        assert decode_envelope(packed(resultCrc32=fields["resultCrc32"] ^ 1)) is None
        odd = decode_envelope(packed(traceCrc32=fields["traceCrc32"] ^ 1))
        assert odd is not None and odd.trace_bytes is None and odd.result_json == result

    def test_a_trace_in_the_json_layout_is_still_read(self, store: Any) -> None:
        env = _legacy_traced()
        trace = orjson.loads(env.trace_bytes or b"")
        data = orjson.dumps(env.to_json())  # as written before packing
        got = decode_envelope(data)
        assert got is not None and got.trace_json is not None and got == env
        header = {k: v for k, v in env.to_json().items() if k not in ("trace", "result")}
        bad = [
            data.replace(b'"cost":', b'"cost":1', 1),  # a trace its checksum does not match
            orjson.dumps({**header, "traceCrc32": None, "trace": trace, "result": env.result}),
            orjson.dumps({**header, "result": env.result}),  # a checksum without its trace
            orjson.dumps({k: v for k, v in header.items() if k != "traceCrc32"}
                         | {"trace": trace, "result": env.result}),
            orjson.dumps({**header, "resultTokenLimit": None, "trace": trace, "result": env.result}),
        ]
        assert [d for d in bad if decode_envelope(d) is not None] == []
        whole = {k: v for k, v in env.to_json().items() if k not in ("resultCrc32", "traceCrc32")}
        assert decode_envelope(orjson.dumps(whole)) == env  # written before the checksums

    def test_a_result_that_does_not_fit_its_token_counts_is_served_whole_but_never_sliced(
        self, store: Any
    ) -> None:
        good = envelope(1, 0, [2, 3]).to_json()
        assert decode_envelope(orjson.dumps(good)).sliceable  # type: ignore[union-attr]
        for tokens in ([5], [5, 5, 5]):
            odd = decode_envelope(orjson.dumps({**good, "relatedTokens": tokens}))
            assert odd is not None and not odd.sliceable
            assert odd.result_json == envelope(1, 0, [2, 3]).result_json

    def test_freshness_needs_the_soft_ttl_and_the_running_configuration(
        self, store: Any
    ) -> None:
        env = envelope(1, 0, [], computed_at_ms=NOW_MS, config="abc")
        assert is_fresh(env, NOW_MS + SOFT_TTL_S * 1000 - 1, soft_ttl_s=store.soft_ttl_s,
                        config_hash="abc")
        assert not is_fresh(env, NOW_MS + SOFT_TTL_S * 1000, soft_ttl_s=store.soft_ttl_s,
                            config_hash="abc")
        assert not is_fresh(env, NOW_MS, soft_ttl_s=store.soft_ttl_s, config_hash="other")


def _a_trace(*contents: str) -> Trace:
    graph, nb = one_notebook()
    focus = graph.note("F", nb, content="focus")
    for k, content in enumerate(contents):
        graph.link(focus, graph.note(f"T{k}", nb, content=content))
    return trace_of(graph, focus)


_TRACE = _a_trace("a \ud83d cut", "plain", "x" * 3000)
#: without a lone surrogate: the JSON layout of the whole envelope is written by orjson
_PLAIN_TRACE = _a_trace("plain", "x" * 3000)


def _traced(trace: Trace = _TRACE) -> Envelope:
    return replace(envelope(1, 0, []), strategy="focus-context", seed=None, result_limit=2000,
                   trace_json=trace.to_bytes(), result_json=result_json(cut(trace, 2000)))


def _legacy_traced() -> Envelope:
    """A trace in its JSON form, as written before format 2."""
    return replace(_traced(_PLAIN_TRACE), trace_json=orjson.dumps(_PLAIN_TRACE.to_json()))


class TestMemoryCache(DecodingContract):
    backend_name = "memory"


class TestFakeRedisCache(DecodingContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisCache(DecodingContract):
    backend_name = "redis"


@pytest.mark.redis
class TestClusterCache(DecodingContract):
    backend_name = "cluster"


def _flip(header: bytes, stream: bytes, at: int) -> bytes:
    """The packed value with one bit of its frames' byte ``at`` flipped."""
    return header + b"\n" + stream[:at] + bytes([stream[at] ^ 1]) + stream[at + 1:]

"""The :class:`service.ports.SnapshotCache` contract on every backend (in memory, fakeredis, the
real Redis, a local Redis Cluster), continued: what a cache holds is checked before it is trusted.
Corrupt, foreign and cut-short values decode to nothing (a miss, overwritten by the next write), a
value without checksums is checked whole, a trace is kept as checked bytes and parsed only when asked,
a result that does not fit its token counts is served whole but never sliced, and freshness needs
both the soft TTL and the running configuration.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from service.envelope import decode_envelope, is_fresh
from tests.contracts.backends import SOFT_TTL_S
from tests.contracts.cache_contract import CacheContract, envelope, wf, write
from tests.redis.readers import snapshot_of
from tests.support import NOW_MS


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

    def test_a_trace_is_kept_as_checked_bytes_and_parsed_only_when_asked(self, store: Any) -> None:
        trace = {"format": 1, "focusId": 1, "notes": {"2": {"title": "a \\uD83D cut"}}}
        env = replace(envelope(1, 0, []), strategy="focus-context", seed=None, result_limit=2000,
                      trace_json=orjson.dumps(trace))
        data = env.encode()
        got = decode_envelope(data)
        assert got == env and "trace" not in got.__dict__  # not parsed by decoding
        assert got.trace == trace and got.to_json()["trace"] == trace
        header = {k: v for k, v in env.to_json().items() if k not in ("trace", "result")}
        bad = [
            data.replace(b'"title":"a', b'"title":"b'),  # a trace its checksum does not match
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

"""The benchmark's pure parts: which ids a run rebuilds, its percentiles, and its report rendered
from the committed results (the keys the report reads are the ones latest.json keeps)."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ops.bench
from ops.bench.doughnut_http import pooled_quantile
from ops.bench.graph import pages
from ops.bench.helpers import percentile
from ops.bench.plan import PAGE, size_name
from ops.bench.report import render_markdown
from ops.bench.stages import floor_figures, quantile_s, slowest_lines
from ops.bench.targets import TARGETS, TOPOLOGIES

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@given(st.lists(st.integers(1, 10**7), unique=True, max_size=3000).map(sorted),
       st.integers(1, 2500))
def test_pages_are_runs_of_consecutive_live_ids_spread_over_the_table(ids: list[int],
                                                                      notes: int) -> None:
    picked = pages(ids, notes)
    assert len(picked) == len(set(picked)) == min(notes, len(ids))
    positions = [ids.index(i) for i in picked]
    runs = [positions[k : k + PAGE] for k in range(0, len(positions), PAGE)]
    for run in runs:
        assert run == list(range(run[0], run[0] + len(run)))  # consecutive live ids
    starts = [run[0] for run in runs]
    assert starts == sorted(starts)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200), st.floats(0, 1))
def test_percentile_is_a_member_with_that_share_at_or_below_it(values: list[float],
                                                               fraction: float) -> None:
    p = percentile(values, fraction)
    assert p in values
    at_or_below = sum(v <= p for v in values)
    assert at_or_below >= fraction * len(values) - 1e-9
    assert sum(v < p for v in values) < max(1, math.ceil(fraction * len(values)))


def test_percentile_of_nothing_is_nan_and_sizes_are_named() -> None:
    assert math.isnan(percentile([], 0.5))
    assert [size_name(n) for n in (10_000, 100_000, 1_000_000, 2_500)] == ["10k", "100k", "1m", "2500"]


#: figures newer than the committed runs (their sections exist there, these keys not yet)
#: targets a committed run may predate (the full run is older than the quick one)
NEWER = frozenset({
    "reader.feed_bound_ratio_p50", "rebuild.full_speedup.wavefront", "rebuild.full_speedup.layered",
    "rebuild.full_speedup.focus-context", "rebuild.full_rows_per_snapshot",
    "memory.focus_context_bytes_per_snapshot", "today.reads.hit_ratio_p50",
    "today.reads.other_limit_ratio_p50", "reader.http_saturation_over_floor",
    *(f"{section}.{key}" for section, _ in TOPOLOGIES
      for key in ("p95_over_floor", "first_edit_over_floor")),
})


def test_the_report_renders_every_target_from_the_committed_results() -> None:
    # the full run predates the scale-out sections; the quick run has no 10k -> 1M scaling section
    # (nor today's Doughnut at size: ``today_scale``, a section of the full run newer than it)
    allowed = {"latest.json": {"scaling", "today_scale", "invalidation_cdc"},
               "full/latest.json": {"scale", "invalidation_rabbitmq", "invalidation_cluster",
                                    "today_scale", "doughnut_reads", "invalidation_cdc"}}
    for name, may_lack in allowed.items():
        results = orjson.loads((RESULTS / name).read_bytes())
        markdown = render_markdown(results)
        for target in TARGETS:
            assert target.label in markdown
        sections = {t.key.split(".")[0] for t in TARGETS}
        assert sections - results.keys() <= may_lack, name
        present = [t for t in TARGETS if t.key.split(".")[0] in results and t.key not in NEWER]
        measured = [t for t in present if t.value(results) is not None]
        assert len(measured) >= len(present) - 1, name  # the quick run has no scaling spread


def test_the_profile_shows_the_in_place_split_when_the_run_has_one() -> None:
    results = orjson.loads((RESULTS / "latest.json").read_bytes())
    results["profile"].pop("split", None)  # as an older run without one
    assert "timed in place" not in render_markdown(results)
    results["profile"]["split"] = {
        "strategy": "wavefront", "notes": 1900, "snapshots": 1900, "seconds": 7.6,
        "ms_per_snapshot": {"sql": 1.0, "tokens": 0.75, "write": 0.25, "rest": 2.0}}
    markdown = render_markdown(results)
    assert "A wavefront rebuild of 1,900 notes timed in place" in markdown
    for row in ("| sql | 1.00 | 25% |", "| rest | 2.00 | 50% |", "| all | 4.00 | 100% |"):
        assert row in markdown


def test_an_absolute_figure_is_shown_for_information_never_as_a_miss() -> None:
    results = orjson.loads((RESULTS / "latest.json").read_bytes())
    results["rebuild"]["snapshots_per_s"] = 1.0  # far below the old 1,000/s bound
    line = next(row for row in render_markdown(results).splitlines()
                if "`rebuild.snapshots_per_s`" in row)
    assert "for information" in line and "miss" not in line
    results["memory"]["focus_context_bytes_per_snapshot"] = 47_059.0  # a ratio target still judges
    line = next(row for row in render_markdown(results).splitlines()
                if "`memory.focus_context_bytes_per_snapshot`" in row)
    assert "**miss**" in line


def test_todays_doughnut_at_size_is_reported_with_its_flatness_target() -> None:
    results = orjson.loads((RESULTS / "latest.json").read_bytes())
    run = {"processes": 1, "notes": 50_000, "snapshots": 100_000, "wall_s": 250.0,
           "peak_rss_mb": [400], "wall_s_all_estimated": 5_000}
    results["today_scale"] = {
        "scaling": [{"notes": n, "ms_per_snapshot": ms, "sql_per_snapshot": 0.3}
                    for n, ms in ((10_000, 2.0), (1_000_000, 3.2))],
        "nightly": {"notes": 1_000_000, "live": 980_000, "pieces": 10,
                    "by_processes": {"1": run, "2": run | {"processes": 2, "wall_s": 140.0,
                                                           "peak_rss_mb": [390, 410]}},
                    "speedup_2_vs_1": 1.79}}
    markdown = render_markdown(results)
    line = next(row for row in markdown.splitlines() if "`today_scale.scaling`" in row)
    assert "**miss**" in line  # 3.2 / 2.0 = 1.6 > 1.5
    assert "| 1,000,000 | 3.2 | 0.3 |" in markdown
    assert "| 2 | 50,000 | 100,000 | 140 | 390, 410 | 5,000 |" in markdown


def test_the_full_path_table_shows_the_warm_ceiling_when_the_run_has_one() -> None:
    results = orjson.loads((RESULTS / "latest.json").read_bytes())
    full = results["rebuild"]["full"]["wavefront"]
    full.pop("speedup_warm", None)  # as a run from before the warm pass
    assert "| warm |" in render_markdown(results)
    full["speedup_warm"] = 7.77
    assert "| 7.77× |" in render_markdown(results)


def _where() -> dict[str, str]:
    """ops.bench's table of where each figure is measured: key (or dotted prefix) -> module."""
    block = (ops.bench.__doc__ or "").split("::\n\n", 1)[1].split("\n\n", 1)[0]
    table: dict[str, str] = {}
    for line in block.splitlines():
        keys, module, *_ = re.split(r"\s{2,}", line.strip())
        table.update(dict.fromkeys(keys.split(", "), module))
    return table


def test_every_figure_of_the_committed_results_says_which_module_measures_it() -> None:
    where = _where()
    results = orjson.loads((RESULTS / "latest.json").read_bytes())
    assert set(results) <= set(where), set(results) - set(where)
    for key, module in where.items():
        assert key.split(".")[0] in where, key  # a sub-key's section has an entry of its own
        assert importlib.util.find_spec(module) is not None, (key, module)



def test_a_stage_quantile_is_read_from_buckets_as_prometheus_reads_it() -> None:
    counts = {0.01: 0.0, 0.02: 10.0, 0.05: 20.0, math.inf: 20.0}
    assert quantile_s(counts, 0.5) == pytest.approx(0.02)
    assert quantile_s(counts, 0.25) == pytest.approx(0.015)  # linear within (0.01, 0.02]
    assert quantile_s(counts, 0.95) == pytest.approx(0.02 + 0.03 * 0.9)
    assert quantile_s({0.01: 2.0, math.inf: 4.0}, 0.9) == 0.01  # in +Inf: the last finite bound
    assert math.isnan(quantile_s({0.01: 0.0, math.inf: 0.0}, 0.5))
    assert math.isnan(quantile_s({}, 0.5))


def test_each_edit_is_set_against_its_own_floor_beside_the_p50_edits() -> None:
    """A wide edit is slow because its foci are many: over its own floor it is not an outlier."""
    samples = [100.0] * 19 + [500.0]
    single = {"p95_ms": 500.0, "samples_ms": samples, "timeouts": 0, "warmup_ms": [120.0]}
    rebuilt = [40.0] * 19 + [400.0]  # the last edit's foci take ten times as long in process
    figures = floor_figures(single, rebuilt, 10.0, 50, {}, 40.0)
    assert figures["floor_ms"] == 100.0 and figures["p95_over_floor"] == 5.0
    assert figures["p95_over_own_floors"] == 1.0
    timed_out = floor_figures(single | {"timeouts": 1}, rebuilt, 10.0, 50, {}, 40.0)
    assert math.isnan(timed_out["p95_over_own_floors"])  # the samples no longer line up


def test_the_slowest_edits_say_their_width_and_the_edit_before() -> None:
    pairs = [(9, 90), (1, 10), (2, 20), (3, 30)]  # (the first: the edit before the timed ones)
    foci = [({9}, {9, 90, 91, 92, 93}), ({1, 10}, {1, 10}), ({2}, {2, 20, 21, 22}),
            ({3, 30}, {3, 30, 31})]
    lines = slowest_lines(pairs, foci, [90.0, 400.0, 150.0], count=2)
    assert lines == ["400 ms: 1/4 foci, watched near, after an edit of 2",
                     "150 ms: 2/3 foci, watched urgent, after an edit of 4"]
    hub = [foci[0], ({1}, {1, 10, *range(100, 140)})]  # more than a small edit's foci
    assert slowest_lines(pairs[:2], hub, [90.0], count=1) == [
        "90 ms: 1/42 foci, watched wide, after an edit of 5"]
    assert slowest_lines(pairs[:2], foci[:2], [90.0], count=4) == [
        "90 ms: 2/2 foci, watched urgent, after an edit of 5"]


def test_slices_of_doughnut_reads_pool_into_one_distribution_by_their_requests() -> None:
    # a slice of 100 reads all at 1 ms and one of 300 at 3 ms: three quarters of the reads are 3 ms
    fast = [1_000.0] * 100
    slow = [3_000.0] * 100
    assert pooled_quantile([(fast, 100), (slow, 300)], .25) == 1_000.0
    assert pooled_quantile([(fast, 100), (slow, 300)], .26) == 3_000.0
    assert pooled_quantile([(fast, 300), (slow, 100)], .5) == 1_000.0
    assert pooled_quantile([(fast, 300), (slow, 100)], .99) == 3_000.0
    assert pooled_quantile([], .5) == 0.0

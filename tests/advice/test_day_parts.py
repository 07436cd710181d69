"""Day parts (issue 34 item 1, docs/decisions/0248): the overcommit and autoscaling advice read
through a refresh's day parts equal the full read, every time; a refresh queries again only the
days whose inputs changed; the stamp moves with every input the two queries read; a broken
parts file, a damaged part or a failing write costs a full read, nothing else."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuledger.analytics.advice.run import autoscaling_proposals, overcommit_pools
from gpuledger.core.config import Settings
from gpuledger.core.period import Period
from gpuledger.core.window import Window
from gpuledger.dashboards import serving_results
from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.day_parts import DayParts, day_parts_path, kept_day_parts
from gpuledger.warehouse.queries.advice import per_minute_inputs_stamps
from gpuledger.warehouse.sample_fingerprints import SAMPLES, TOKENS, rebuild
from tests.analytics.builders import simulated

DATA = Window(datetime(2026, 10, 31, 12, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
WINDOW = Window(datetime(2026, 10, 31, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
"""Two whole UTC days (the first half empty): a day part is kept for whole days only."""
DAY_ONE, DAY_TWO = WINDOW.days()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulated(tmp_path_factory.mktemp("parts") / "wh.duckdb", 32, DATA, seed=11)


@pytest.fixture
def copy(fleet: Path, tmp_path: Path) -> Path:
    return Path(shutil.copyfile(fleet, tmp_path / "wh.duckdb"))


def _advice(path: Path, days: DayParts | None) -> tuple[object, object]:
    with Warehouse.open(path, read_only=True) as wh:
        return (overcommit_pools(wh, WINDOW, Settings(), days=days),
                autoscaling_proposals(wh, WINDOW, Settings(), days=days))


def test_a_refresh_queries_again_only_the_days_whose_inputs_changed(copy: Path) -> None:
    full = _advice(copy, None)
    pools, proposals = full
    assert pools and proposals, "the fleet has shared cards and serving Deployments"
    with DayParts(day_parts_path(copy)) as first:
        assert _advice(copy, first) == full
    assert (first.reads, first.hits) == (4, 0)  # two days, two queries
    with DayParts(day_parts_path(copy)) as second:
        assert _advice(copy, second) == full
    assert (second.reads, second.hits) == (0, 4)

    with Warehouse.open(copy) as wh:  # an hour of day two's samples dropped (a re-collect)
        wh.con.execute("DELETE FROM gpu_sample_values WHERE ts >= ? AND ts < ?",
                       [datetime(2026, 11, 1, 6, tzinfo=UTC), datetime(2026, 11, 1, 7, tzinfo=UTC)])
        rebuild(wh.con, SAMPLES)  # as the re-collect's load keeps them (test_sample_fingerprints)
    changed = _advice(copy, None)
    assert changed != full, "the dropped hour moves the advice"
    with DayParts(day_parts_path(copy)) as third:
        assert _advice(copy, third) == changed
    assert (third.reads, third.hits) == (2, 2)  # day two again, day one from its parts


def test_a_second_reader_of_the_same_days_reads_each_part_again_from_its_file(copy: Path) -> None:
    # A reader reads a day once, so nothing of a part is held after it is handed out (0277); a
    # second reader of the same days in one refresh reads each part's file again, not the
    # warehouse.
    full = _advice(copy, None)
    with DayParts(day_parts_path(copy)) as fill:
        _advice(copy, fill)
    with DayParts(day_parts_path(copy)) as parts:
        assert _advice(copy, parts) == full
        assert _advice(copy, parts) == full
    assert (parts.reads, parts.hits) == (0, 8)


def test_the_stamp_moves_with_every_input_the_queries_read(copy: Path) -> None:
    def stamps() -> tuple[str, str]:
        with Warehouse.open(copy, read_only=True) as wh:
            both = per_minute_inputs_stamps(wh, [(day.start, day.end) for day in (DAY_ONE, DAY_TWO)])
            alone = [per_minute_inputs_stamps(wh, [(day.start, day.end)])[0] for day in (DAY_ONE, DAY_TWO)]
        assert both == alone, "a day's stamp does not depend on the days stamped beside it"
        return both[0], both[1]

    before = stamps()
    assert before == stamps(), "a stamp is a function of the rows"
    edits = [  # (statement, parameters, which days it reaches)
        ("UPDATE token_samples SET generation_tokens_total = generation_tokens_total + 1 "
         "WHERE ts = (SELECT max(ts) FROM token_samples)", [], (False, True)),
        ("UPDATE pods SET labels = '{\"gpuledger.io/workload-class\": \"batch\"}' WHERE (namespace, pod) IN "
         "(SELECT namespace, pod FROM gpu_series s JOIN gpu_sample_values v USING (series_id) "
         "WHERE v.ts < ? AND pod IS NOT NULL LIMIT 1)", [DAY_TWO.start], (True, None)),
        ("UPDATE gpu_sample_values SET power_w = 1, gpu_temp_c = 1 WHERE ts < ?",
         [DAY_TWO.start], (True, False)),  # no kept read reads them, but the fingerprint is the row's
        ("UPDATE gpu_sample_values SET fb_used_mib = fb_used_mib + 1 WHERE ts < ?",
         [DAY_TWO.start], (True, False)),  # the allocations' memory statistics read it
        ("UPDATE gpu_sample_values SET gpu_util = coalesce(gpu_util, 0) + 1 WHERE ts = "
         "(SELECT max(ts) FROM gpu_sample_values)", [], (False, True)),
        ("UPDATE gpus SET pool = 'elsewhere' WHERE uuid = (SELECT min(uuid) FROM gpus)", [], (True, True)),
    ]
    for sql, params, reaches in edits:
        with Warehouse.open(copy) as wh:  # each edit stands for a load: the fingerprints as it keeps them
            wh.con.execute(sql, params)
            rebuild(wh.con, SAMPLES)
            rebuild(wh.con, TOKENS)
        after = stamps()
        for day, moved in enumerate(reaches):
            if moved is not None:
                assert (after[day] != before[day]) is moved, (sql, day)
        before = after


def test_a_window_expected_is_stamped_once_for_all_its_days(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`DayParts.expect` stamps the window's whole days in one batch (the pods hashed once for
    all of them); the day-at-a-time reads after it take no stamp of their own, and find the
    same stamps a day-by-day reader took (every part read back)."""
    from gpuledger.warehouse import day_parts
    from gpuledger.warehouse.protocols import ReadableWarehouse

    with DayParts(day_parts_path(copy)) as first:
        _advice(copy, first)  # parts kept under the stamps taken a day at a time
    batches: list[int] = []
    real = day_parts.per_minute_inputs_stamps

    def counted(wh: ReadableWarehouse, days: list[tuple[datetime, datetime]]) -> list[str]:
        batches.append(len(days))
        return real(wh, days)

    monkeypatch.setattr(day_parts, "per_minute_inputs_stamps", counted)
    with DayParts(day_parts_path(copy)) as parts, Warehouse.open(copy, read_only=True) as wh:
        parts.expect(wh, WINDOW)
        assert batches == [2]
        assert (overcommit_pools(wh, WINDOW, Settings(), days=parts),
                autoscaling_proposals(wh, WINDOW, Settings(), days=parts)) == _advice(copy, None)
    assert batches == [2] and (parts.reads, parts.hits) == (0, 4)  # every part read back, no new stamp
    with DayParts(day_parts_path(copy)) as edge, Warehouse.open(copy, read_only=True) as wh:
        edge.expect(wh, Window(DATA.start, WINDOW.end))  # a partial day is never kept: not stamped
    assert batches == [2, 1]


def _parts_of(copy: Path, day: Window) -> list[Path]:
    """The part files of `day`, one per query."""
    return sorted(day_parts_path(copy).glob(f"*/{day.start.date().isoformat()}.daypart"))


def test_a_part_that_is_not_whole_is_read_again_and_replaced(copy: Path) -> None:
    # A crash before a part's blocks reached the disk can leave it cut short (parts are not
    # synced, decision 0281); anything else in its place reads as not a part. Either is read
    # again and replaced, the result a full read's, the other parts still read.
    full = _advice(copy, None)
    with DayParts(day_parts_path(copy)) as fill:
        _advice(copy, fill)
    short, other = _parts_of(copy, DAY_TWO)
    short.write_bytes(short.read_bytes()[:-10])
    other.write_bytes(b"not a day part" * 10)
    with DayParts(day_parts_path(copy)) as damaged:
        assert _advice(copy, damaged) == full
    assert (damaged.reads, damaged.hits, damaged.failure) == (2, 2, None)
    with DayParts(day_parts_path(copy)) as again:
        assert _advice(copy, again) == full
    assert (again.reads, again.hits) == (0, 4)


def test_the_parts_an_earlier_release_kept_in_duckdb_are_removed_and_half_writes_too(copy: Path) -> None:
    folder = day_parts_path(copy)
    legacy = folder.with_name(folder.name + ".duckdb")
    legacy.write_bytes(b"the parts' DuckDB file of decision 0248" * 100)
    with DayParts(folder) as parts:
        _advice(copy, parts)
    assert not legacy.exists(), "a cache no reader reads again, removed when the folder is made"
    half = _parts_of(copy, DAY_ONE)[0].with_suffix(".daypart.tmp")
    half.write_bytes(b"a part a kill cut short")
    with DayParts(folder) as again:
        assert _advice(copy, again) == _advice(copy, None)
    assert not half.exists() and again.hits == 4


def test_a_part_that_cannot_be_read_or_written_costs_a_full_read_not_the_result(copy: Path) -> None:
    full = _advice(copy, None)
    with DayParts(day_parts_path(copy)) as parts:
        _advice(copy, parts)
    for part in _parts_of(copy, DAY_TWO):  # a write that fails: a folder where it writes
        part.unlink()
        part.with_suffix(".daypart.tmp").mkdir()
    with DayParts(day_parts_path(copy)) as failed:
        assert _advice(copy, failed) == full
    # day one's first query from its part; day two's write fails and ends the parts for the
    # round: every later day is read whole and nothing more is written
    assert (failed.hits, failed.reads) == (1, 3)
    assert failed.failure is not None and "dayparts" in failed.failure
    assert not _parts_of(copy, DAY_TWO)
    for part in _parts_of(copy, DAY_ONE):  # a part that cannot be read: a folder in its place
        part.unlink()
        part.mkdir()
    with DayParts(day_parts_path(copy)) as unreadable:
        assert _advice(copy, unreadable) == full
        assert unreadable.prune(DAY_TWO.start.date()) == 0
    assert unreadable.reads == 4 and unreadable.failure is not None


def test_refresh_serving_keeps_the_parts_and_stores_what_a_full_read_gives(copy: Path) -> None:
    period = "2026-11"
    settings = Settings()
    with DayParts(day_parts_path(copy)) as parts, Warehouse.open(copy, read_only=True) as wh:
        for name in ("advice:overcommit", "advice:autoscaling"):
            assert serving_results.compute(wh, settings, name, period, days=parts) == \
                serving_results.compute(wh, settings, name, period), name
    month = len(list(Period.exact(period).window.days()))
    assert parts.reads == 2 * month  # the month's days, each query, once: the second read is the full one


def test_the_nodes_hourly_activity_read_by_day_through_the_parts_is_the_months(copy: Path) -> None:
    """The fragmentation advice's evidence (every node's hourly activity) read a day at a time
    through the parts equals one query over the window, row for row, kept or not."""
    from gpuledger.analytics.advice.run import by_day, through
    from gpuledger.warehouse.queries.advice import node_activity_hourly

    source = "gr_engine_active"
    with Warehouse.open(copy, read_only=True) as wh:
        whole = node_activity_hourly(wh, WINDOW.start, WINDOW.end, source)
        assert whole.height > 24 and whole["activity"].drop_nulls().len() > 0
        for _ in range(2):  # the first read fills the parts, the second reads them
            with DayParts(day_parts_path(copy)) as parts:
                read = through(parts, "node_activity_hourly", source,
                               lambda w, lo, hi: node_activity_hourly(w, lo, hi, source))
                assert by_day(read, wh, WINDOW, ("node", "ts")).equals(whole)
        assert (parts.reads, parts.hits) == (0, 2)
        settings = Settings.model_validate({"advice": {"fragmentation_threshold": 0.0}})  # reads it
        with DayParts(day_parts_path(copy)) as parts:
            kept = serving_results.compute(wh, settings, "advice:fragmentation", "2026-11", days=parts)
        assert kept == serving_results.compute(wh, settings, "advice:fragmentation", "2026-11")
        assert parts.reads > 0, "the fragmentation advice read its evidence through the parts"


def test_refresh_serving_fills_the_parts_beside_the_warehouse(copy: Path) -> None:
    from collections import Counter
    from urllib.parse import unquote

    with Warehouse.open(copy, read_only=True) as wh:
        serving_results.refresh_serving(wh, Settings())
    kept = Counter(unquote(part.parent.name).split(":")[0]
                   for part in day_parts_path(copy).glob("*/*.daypart"))
    month = len(list(Period.exact("2026-11").window.days()))
    october = len(list(Period.exact("2026-10").window.days()))
    assert sorted(kept.items()) == [("allocation_stats", 2),  # one per month, kept whole
                                    ("serving_minutes", month + october),
                                    ("shared_card_levels", month + october),
                                    # and the token counters' day before October
                                    ("token_pieces", month + october + 1)]


def test_a_report_after_a_refresh_reads_no_day_again(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`report monthly`'s advice (`fleet_advice`) reads through the parts a refresh kept: with
    the per-minute queries made to fail, it still gives what a full read gives."""
    from gpuledger.analytics.advice import run
    from gpuledger.reports.fleet_advice import fleet_advice

    window = Period.exact("2026-11").window
    with Warehouse.open(copy, read_only=True) as wh:
        with kept_day_parts(copy) as held:  # held: the report reads the month whole
            whole = fleet_advice(wh, window, Settings())
        assert held is not None and held.reads == 0
        serving_results.refresh_serving(wh, Settings())

        def queried(*_: object) -> None:
            raise AssertionError("a day the refresh kept was queried again")

        monkeypatch.setattr(run.queries, "serving_minutes", queried)
        monkeypatch.setattr(run.queries, "shared_card_levels", queried)
        assert fleet_advice(wh, window, Settings()) == whole
        assert whole, "the fleet's month has advice rows"


def test_a_report_and_recommend_after_a_refresh_compute_no_allocation_again(
        copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`report monthly` (`compose.gather`) and `recommend` read the allocations' statistics a
    refresh kept (decision 0261): with the statement made to fail, both still answer."""
    from gpuledger.cli import main
    from gpuledger.reports.compose import gather
    from gpuledger.warehouse.queries import workloads

    with Warehouse.open(copy, read_only=True) as wh:
        serving_results.refresh_serving(wh, Settings())

    def computed(*_: object) -> None:
        raise AssertionError("an allocation the refresh kept was computed again")

    monkeypatch.setattr(workloads, "allocation_stats", computed)
    with Warehouse.open(copy, read_only=True) as wh:
        assert gather(wh, Settings(), "2026-11").recommendations is not None
    assert main(["--warehouse", str(copy), "recommend", "--period", "2026-11", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["profiles"], "the month's workloads were profiled"


def test_one_process_at_a_time_keeps_the_parts(copy: Path, tmp_path: Path) -> None:
    """A second reader while the parts are held reads the month whole (None), never waits; a
    warehouse that is not a file keeps none."""
    with kept_day_parts(copy) as first:
        assert first is not None
        with kept_day_parts(copy) as second:
            assert second is None
    with kept_day_parts(copy) as again:
        assert again is not None
    with kept_day_parts(tmp_path / "absent.duckdb") as absent:
        assert absent is None
    assert not day_parts_path(tmp_path / "absent.duckdb").exists()


def test_prune_drops_the_days_of_months_no_longer_kept(copy: Path) -> None:
    from datetime import date

    with DayParts(day_parts_path(copy)) as parts:
        _advice(copy, parts)
        assert parts.prune(date(2026, 11, 1)) == 2  # day one, both queries
        assert parts.prune(date(2026, 11, 1)) == 0
    with DayParts(day_parts_path(copy)) as again:
        _advice(copy, again)
    assert (again.reads, again.hits) == (2, 2)  # day one read again, day two kept


def test_a_day_kept_as_it_is_loaded_is_not_queried_again(copy: Path) -> None:
    """`keep_day` (the demo, once each day is loaded, decision 0258) keeps every per-minute input
    and the token counters of the day: the month's advice and token increases then query no
    kept day again (only the token counters' day before the window, which no load kept) and
    equal a full read."""
    from gpuledger.analytics.advice.run import fragmentation_advice, keep_day
    from gpuledger.analytics.workloads.tokens import token_increases

    settings = Settings.model_validate({"advice": {"fragmentation_threshold": 0.0}})  # reads its evidence
    with Warehouse.open(copy, read_only=True) as wh:
        full = (_advice(copy, None), fragmentation_advice(wh, WINDOW, settings), token_increases(wh, WINDOW))
        with DayParts(day_parts_path(copy)) as kept:
            for day in WINDOW.days():
                keep_day(kept, wh, day, settings)
        assert (kept.reads, kept.hits) == (2 * 4, 0)  # two days: three advice queries, the counters
        with DayParts(day_parts_path(copy)) as parts:
            advice = _advice(copy, parts)
            assert (parts.reads, parts.hits) == (0, 4)
            fragmentation = fragmentation_advice(wh, WINDOW, settings, days=parts)
            assert parts.reads == 0 and parts.hits == 6
            tokens = token_increases(wh, WINDOW, days=parts)
            assert (parts.reads, parts.hits) == (1, 8)  # the day before the window read, not kept
    assert (advice, fragmentation) == full[:2]
    assert tokens.equals(full[2]) and tokens.height > 0

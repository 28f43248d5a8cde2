"""The tag figures table: ``compare --tag`` read from counts per figure value equals the figures computed card by card
from the summary rows (sorted lists, as before the table), with and without retracted cards, after cards move and
after an upgrade from the previous revision; ``verify`` proves the table and reports a tampered count. Both
backends, a few hundred synthetic cards."""

from __future__ import annotations

import json
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from sqlalchemy import text

from ledger import Ledger
from ledger.app import synthetic
from ledger.app.retract import retract_card
from ledger.app.tag_stats import tag_report
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import card_stream
from ledger.store.backends import open_store
from ledger.store.base import head_revision, migrations_dir
from tests.replayed import stored


def _q(values: list[float], q: float) -> float:
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _spread(values: list[float], low_is_best: bool = False) -> dict[str, Any]:
    v = sorted(values)
    best, worst = (v[0], v[-1]) if low_is_best else (v[-1], v[0])
    mean = float(sum(map(Fraction, v)) / len(v))
    return {"n": len(v), "mean": mean, "best": best, "q1": _q(v, 0.25), "median": _q(v, 0.5), "q3": _q(v, 0.75),
            "worst": worst}  # fmt: skip


def by_card(led: Ledger, tags: list[str], include_retracted: bool) -> list[dict[str, Any]]:
    """The figures of ``tags`` computed from every card's summary row, one card at a time."""
    rows = sorted(
        (r for r, _ in stored(led.store).values() if r is not None and (include_retracted or r.retracted is None)),
        key=lambda r: (r.opened_key, r.card_id),
    )
    out = []
    for tag in tags:
        mine = [r for r in rows if r.tags and tag in json.loads(r.tags)]
        if not mine:
            continue
        best = max(r.score for r in mine)
        games: dict[str, list[Any]] = {}
        for r in mine:
            for g in json.loads(r.game_stats):
                games.setdefault(g[0], []).append(g)
        gout = []
        for gid, plays in sorted(games.items()):
            bases = Counter(json.dumps(g[6], separators=(",", ":")) for g in plays)
            base = json.loads(min(bases.items(), key=lambda b: (-b[1], b[0]))[0])
            reached = [min(g[2] + 1, g[3]) for g in plays]
            count = max([*reached, len(base), *(len(g[4]) for g in plays)], default=0)
            levels = []
            for lv in range(1, count + 1):
                acts = [float(g[4][lv - 1]) for g in plays if len(g[4]) >= lv]
                scores = [float(g[5][lv - 1]) if len(g[5]) >= lv else 0.0 for g in plays]
                b = base[lv - 1] if lv <= len(base) and base[lv - 1] >= 0 else None
                a = _spread(acts, low_is_best=True) if acts else None
                levels.append({
                    "level": lv, "baseline": b, "reached": sum(1 for x in reached if x >= lv),
                    "completed": len(acts), "actions": a,
                    "median_over_baseline": a["median"] / b if a is not None and b else None,
                    "score": _spread(scores),
                })  # fmt: skip
            gout.append({
                "game_id": gid, "cards": len(plays), "completed": sum(1 for g in plays if g[3] and g[2] >= g[3]),
                "score": _spread([g[1] for g in plays]), "levels": levels,
            })  # fmt: skip
        out.append({
            "tag": tag, "cards": len(mine), "score": _spread([r.score for r in mine]),
            "best_card": next(r.card_id for r in mine if r.score == best), "games": gout,
            "cost": None,  # no synthetic card carries usage
        })  # fmt: skip
    out.sort(key=lambda t: (-t["score"]["median"], -t["score"]["mean"], -t["cards"], t["tag"]))
    for i, t in enumerate(out):
        t["rank"] = i + 1
    return out


def _same(led: Ledger, tags: list[str]) -> None:
    import msgspec

    for inc in (False, True):
        got = msgspec.to_builtins(tag_report(led, tags, include_retracted=inc))
        want = by_card(led, tags, inc)
        assert got["tags"] == [{k: t[k] for k in got["tags"][0]} for t in want] if want else got["tags"] == []
        assert got["missing"] == [t for t in tags if t not in {w["tag"] for w in want}]


TAGS = [*synthetic.TAGS, "nobody"]


def test_figures_equal_the_cards_counted_one_by_one(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        ids = synthetic.write_cards(led, 160, seed=5)
        _same(led, TAGS)
        # Cards move: retracted ones leave the default figures; new cards (one event at a time) enter them.
        for cid in ids[:9]:
            retract_card(led, cid, "bad run")
        synthetic.write_cards(led, 40, seed=6, first=160, per_step=True)
        _same(led, TAGS)
        assert verify_ledger(led.store).ok
    r = CliRunner().invoke(cli, ["--db", backend_url, "rebuild-summary", "--check"])
    assert r.exit_code == 0, r.output


def test_verify_reports_a_tampered_figure_and_a_rebuild_mends_it(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        synthetic.write_cards(led, 30, seed=1)
        led.store.summary_at_head()
        with led.store.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(text("UPDATE tag_figures SET n = n + 1 WHERE metric = 'S' AND tag = 'nightly'"))
        report = verify_ledger(led.store)
        assert not report.ok
        assert any("tag nightly figure S" in d for d in report.summary_differences)
    r = CliRunner().invoke(cli, ["--db", backend_url, "rebuild-summary", "--check"])
    assert r.exit_code == 1 and "tag nightly figure S" in r.output
    assert CliRunner().invoke(cli, ["--db", backend_url, "rebuild-summary"]).exit_code == 0
    with Ledger.open(backend_url) as led:
        assert verify_ledger(led.store).ok
        _same(led, TAGS)


def test_an_upgraded_ledger_gets_its_figures(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        synthetic.write_cards(led, 60, seed=2)
        sid = synthetic.baselines(led)
        led.store.summary_at_head()
        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        with led.store.engine.execution_options(ledger_immediate=True).begin() as conn:  # type: ignore[attr-defined]
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0007_summary_position")
    # Cards written at the previous revision (the summary follows them without figures), then the upgrade.
    store = open_store(backend_url)
    assert store.revision() == "0007_summary_position"
    rng = random.Random(3)
    for n in range(60, 80):
        evs = list(synthetic.card_events(rng, n, sid))
        store.append(card_stream(evs[0].card_id), evs, expected_version=0)  # type: ignore[attr-defined]
    store.close()
    assert CliRunner().invoke(cli, ["--db", backend_url, "init"]).exit_code == 0
    with Ledger.open(backend_url) as led:
        assert led.store.revision() == head_revision()
        synthetic.write_cards(led, 10, seed=4, first=80)
        _same(led, TAGS)
        assert verify_ledger(led.store).ok


def test_both_plans_of_a_cards_page_by_tag_agree(tmp_path: Path) -> None:
    """A tag of many cards is paged along the sort's index (each card probed for the tag), not by sorting every
    card of the tag: the same pages either way, every sort that has an index, both directions, from any card."""

    from ledger.store.summary import PageQuery, read_page

    with Ledger.open(tmp_path / "l.sqlite") as led:
        ids = synthetic.write_cards(led, 200, seed=8)
        full = 0
        for sort in ("opened", "score", "id"):
            for desc in (False, True):
                for after in (None, ids[37], ids[150]):
                    q = PageQuery(tags=("agent-2",), sort=sort, descending=desc, limit=9, after=after)
                    sorted_plan = read_page(led.store, q)
                    walked = read_page(led.store, msgspec.structs.replace(q, walk=True))
                    assert walked == sorted_plan
                    full += len(walked) == 9
        assert full >= 12

"""Evidence figures: signing checkpoints over 1,000,000 events, `prove` and `check` of a 10,000-event card,
`verify --checkpoint`, and one-event appends with checkpoints signed as they go next to the same without."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchlib import best, build_card, synthetic_plays

from ledger import Ledger
from ledger.app.checkpoints import make_checkpoint, prove, tree_problem, verify_checkpoint
from ledger.app.evidence_check import check_evidence
from ledger.app.signing import keygen, load_signer, load_verifier
from ledger.domain.events import card_stream
from ledger.store.backends import open_store
from ledger.store.merkle_store import TreeStore


def _fill(led: Ledger, card_id: str, total: int) -> None:
    """Other streams up to ``total`` events, the card's own rows as their bodies (the tree hashes only the chain)."""
    rows = [(e.type, e.ts, e.body) for e in led.store.read_stream(card_stream(card_id))]
    n, i = led.store.count(), 0
    while n < total:
        take = rows[: min(len(rows), total - n, 20_000)]
        led.store.append_encoded(f"card:filler-{i:05d}", take, expected_version=0)
        n += len(take)
        i += 1


def capture_costs(d: Path, signer, steps: int, rounds: int = 3) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Per-append seconds of one-event appends with the tree's tables and without, in alternating blocks of 250;
    and the best per-event seconds of bringing the tree up to date after ``steps`` appends."""
    import sqlite3

    best = {"tree": float("inf"), "none": float("inf"), "catch_up": float("inf")}
    for r in range(rounds):
        stores = {}
        for kind in ("tree", "none"):
            path = d / f"cap-{kind}-{r}.sqlite"
            with Ledger.open(path) as led:
                build_card(led, synthetic_plays(50), f"cap-{r}")
                make_checkpoint(led.store, signer)
            if kind == "none":
                con = sqlite3.connect(path)
                for table in ("merkle_nodes", "merkle_runs", "merkle_heads", "merkle_checkpoints"):
                    con.execute(f"DROP TABLE {table}")
                con.commit()
                con.close()
            stores[kind] = open_store(str(path))
        stream = card_stream(f"cap-{r}")
        row = stores["tree"].read_stream(stream)[-1]
        spent = dict.fromkeys(stores, 0.0)
        try:
            for start in range(0, steps, 250):
                for kind, store in stores.items():
                    t = time.perf_counter()
                    for i in range(start, min(start + 250, steps)):
                        store.append_encoded(stream, [(row.type, row.ts, row.body)], row.version + i)
                    spent[kind] += time.perf_counter() - t
            for kind in stores:
                best[kind] = min(best[kind], spent[kind] / steps)
            t = time.perf_counter()
            make_checkpoint(stores["tree"], signer)
            best["catch_up"] = min(best["catch_up"], (time.perf_counter() - t) / steps)
        finally:
            for store in stores.values():
                store.close()
    return best["none"], best["tree"], best["catch_up"]


def run(quick: bool) -> list[str]:
    total = 100_000 if quick else 1_000_000
    card_steps = 2_000 if quick else 10_000
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        keygen("bench", d / "k")
        signer, verifier = load_signer(d / "k"), load_verifier(d / "k.pub")
        with Ledger.open(d / "bench.sqlite") as led:
            card = "0f0e0d0c-0000-4000-8000-00000000beef"
            t = time.perf_counter()
            card_events = build_card(led, synthetic_plays(card_steps), card)
            _fill(led, card, total)
            lines.append(
                f"ledger of {led.store.count():,} events ({card_events:,} of them one card) built in "
                f"{time.perf_counter() - t:.1f} s"
            )
            first, _ = best(lambda: make_checkpoint(led.store, signer), 1)
            lines.append(f"first checkpoint over {total:,} events (builds the stored tree): {first:.2f} s")
            incr = catch = check = float("inf")
            row = led.store.read_stream("card:filler-00000")[-1]
            for r in range(3):
                led.store.append_encoded(f"card:more-{r}", [(row.type, row.ts, row.body)] * 1_000, expected_version=0)
                t_catch, head = best(TreeStore(led.store).catch_up, 1)
                catch = min(catch, t_catch)
                check = min(check, best(lambda: tree_problem(TreeStore(led.store), head), 1)[0])  # noqa: B023
                incr = min(incr, best(lambda: make_checkpoint(led.store, signer), 1)[0])
            lines.append(
                f"checkpoint after 1,000 more events: {incr:.2f} s, of which bringing the stored tree up to date "
                f"{catch * 1000:.1f} ms and checking it against the whole log (rebuilt from the events' hashes) "
                f"{check:.2f} s"
            )
            note = TreeStore(led.store).checkpoints()[-1].note
            t_prove, raw = best(lambda: prove(led, card, note), 2)
            lines.append(f"prove a {card_events:,}-event card: {t_prove * 1000:.0f} ms (GOAL < 100 ms)")
            data = raw.encode()
            t_check, rep = best(lambda: check_evidence(data, verifier), 2)
            assert rep.ok, rep.error
            n_proof = len(json.loads(data)["proof"])
            lines.append(
                f"check it (no re-simulation): {t_check * 1000:.0f} ms (GOAL < 500 ms); evidence file "
                f"{len(data) / 1e6:.2f} MB, of which the multi-proof is {n_proof} hashes ({n_proof * 47:,} bytes)"
            )
            t_verify, rep2 = best(lambda: verify_checkpoint(led.store, note, verifier), 1)
            assert rep2.ok, rep2.error
            lines.append(
                f"verify --checkpoint (the tree rebuilt from {rep2.events:,} events): {t_verify:.1f} s; the "
                f"checkpoint's check of the stored tree against the log: {check / t_verify:.2f}x that"
            )
        steps = 4_000 if quick else 10_000
        none, tree, catch_up = capture_costs(d, signer, steps)
        lines.append(
            f"capture-style one-event appends: {none * 1e6:.0f} us without the tree's tables, {tree * 1e6:.0f} us "
            f"with them: {tree / none:.3f}x (GOAL < 1.05x; an append does no tree work)"
        )
        lines.append(
            f"a checkpoint signed after those {steps:,} appends costs {catch_up * 1e6:.1f} us per event appended "
            f"({catch_up / tree:.1%} of an append), paid by whoever signs it, whenever"
        )
    return lines

"""An example ``ledger.readers`` plugin (docs/import.md shows it whole): a REST client's log of a run, one JSON
object a line: ``{"card": ID}`` first, then one ``{"ts", "game", "guid", "action", "x", "y", "state", "levels",
"full_reset", "empty"}`` per answer, then ``{"tokens": N, "cost": C, "model": M}``."""

import json
from datetime import datetime
from pathlib import Path

from ledger.formats.readers import Answer, Decided, Spent


class ClientLog:
    name = "client-log"

    def reads(self, path: Path) -> bool:
        return path.name.endswith(".client.log")

    def read(self, path: Path) -> list[Decided]:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        decided = Decided(card_id=lines[0]["card"], tags=["rest-client"])
        for d in lines[1:]:
            if "tokens" in d:
                decided.usage = Spent(total_tokens=d["tokens"], cost=d["cost"], model=d["model"])
                continue
            decided.answers.append(
                Answer(
                    datetime.fromisoformat(d["ts"]),
                    d["game"],
                    d["guid"],
                    d["action"],
                    d["state"],
                    d["levels"],
                    d["full_reset"],
                    d["empty"],
                    d.get("x"),
                    d.get("y"),
                )
            )
        return [decided]

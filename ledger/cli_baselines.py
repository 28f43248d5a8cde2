"""`ledger baselines` commands (registered on :data:`ledger.cli.cli`)."""

from __future__ import annotations

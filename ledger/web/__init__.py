"""The viewer: ``ledger view`` and ``ledger bundle``; its own scripts never turn data into markup."""

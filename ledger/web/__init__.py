"""The viewer: ``ledger view`` (a local, read-only web app over a ledger) and ``ledger bundle`` (the same pages as a
static site that opens from ``file://``). The only scripts are the package's own, which never turn data into markup.
"""

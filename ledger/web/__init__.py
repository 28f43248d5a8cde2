"""The viewer: ``ledger view`` (a local, read-only web app over a ledger) and ``ledger bundle`` (the same pages as a
static site that opens from ``file://``).

Pages are rendered on the server by Jinja2 with autoescaping (every tag, opaque value, game id and reasoning read
from the ledger is untrusted); the only scripts are the package's own ``static/viewer.js`` (filters, live updates,
the replay player), which never turns data into markup.
"""

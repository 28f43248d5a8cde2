"""A new SQLite ledger's schema in plain SQL, so that creating one does not load SQLAlchemy and Alembic.

Importing those two takes several times the whole interpreter start, and a first ``ledger import`` or capture
into a new file paid for it. An empty database gets here exactly what the Alembic migrations leave at
:data:`REVISION` (the statements below are the ``sqlite_master`` entries they produce; a test creates a ledger
both ways and compares). Any other case (an existing schema to upgrade, or migrations newer than
:data:`REVISION`) goes through Alembic as before.
"""

from __future__ import annotations

import sqlite3

from ledger.storage.base import head_revision

#: The revision these statements are the schema of.
REVISION = "0009_play_keys"

STATEMENTS = (
    "CREATE TABLE alembic_version (\n\tversion_num VARCHAR(32) NOT NULL, \n\t"
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)\n)",
    "CREATE TABLE snapshots (\n\tstream VARCHAR(400) NOT NULL, \n\tversion INTEGER NOT NULL, \n\t"
    "seq INTEGER NOT NULL, \n\tkind VARCHAR(40) NOT NULL, \n\tbody BLOB NOT NULL, \n\tPRIMARY KEY (stream)\n)",
    'CREATE TABLE "events" (\n\tseq INTEGER NOT NULL, \n\tstream VARCHAR(400) NOT NULL, \n\t'
    "version INTEGER NOT NULL, \n\ttype VARCHAR(40) NOT NULL, \n\tts VARCHAR(40) NOT NULL, \n\t"
    "body BLOB NOT NULL, \n\tprev_hash VARCHAR(64) NOT NULL, \n\thash VARCHAR(64) NOT NULL, \n\t"
    "PRIMARY KEY (seq), \n\tCONSTRAINT uq_events_stream_version UNIQUE (stream, version), \n\t"
    "CONSTRAINT ck_events_version CHECK (version >= 1), \n\t"
    "CONSTRAINT ck_events_hash CHECK (length(hash) = 64 AND length(prev_hash) = 64)\n)",
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END",
    "CREATE TABLE card_summary (\n\tcard_id VARCHAR(400) NOT NULL, \n\tversion INTEGER NOT NULL, \n"
    "\topened VARCHAR(40), \n\topened_key INTEGER NOT NULL, \n\tclosed VARCHAR(40), \n"
    "\tclosed_key INTEGER, \n\tclose_reason VARCHAR(40), \n\tlast_ts VARCHAR(40), \n"
    "\tlast_key INTEGER, \n\tstate VARCHAR(8) NOT NULL, \n\tgames INTEGER NOT NULL, \n"
    "\tplays INTEGER NOT NULL, \n\tactions INTEGER NOT NULL, \n\tevents INTEGER NOT NULL, \n"
    "\tlevels INTEGER NOT NULL, \n\tlevel_count INTEGER NOT NULL, \n\tscore FLOAT NOT NULL, \n\ttags TEXT, \n"
    "\tgame_ids TEXT NOT NULL, \n\tretracted VARCHAR(40), \n"
    "\tretract_reason TEXT, game_stats TEXT DEFAULT '[]' NOT NULL, \n\tPRIMARY KEY (card_id)\n)",
    "CREATE INDEX ix_card_summary_opened ON card_summary (opened_key, card_id)",
    "CREATE INDEX ix_card_summary_score ON card_summary (score, opened_key, card_id)",
    "CREATE INDEX ix_card_summary_state ON card_summary (state, opened_key, card_id)",
    "CREATE TABLE card_summary_keys (\n\tkind VARCHAR(1) NOT NULL, \n\tvalue VARCHAR(400) NOT NULL, \n"
    "\tcard_id VARCHAR(400) NOT NULL, \n\tPRIMARY KEY (kind, value, card_id)\n)",
    "CREATE INDEX ix_card_summary_keys_card ON card_summary_keys (card_id)",
    "CREATE TABLE merkle_nodes (\n\tlevel INTEGER NOT NULL, \n\tidx INTEGER NOT NULL, \n\thash BLOB NOT NULL, \n\t"
    "PRIMARY KEY (level, idx)\n)",
    "CREATE TABLE merkle_state (\n\tid INTEGER NOT NULL, \n\tsize INTEGER NOT NULL, \n\tlast_seq INTEGER NOT NULL, "
    "\n\tPRIMARY KEY (id)\n)",
    "CREATE TABLE merkle_runs (\n\tfirst_idx INTEGER NOT NULL, \n\tfirst_seq INTEGER NOT NULL, \n\t"
    "PRIMARY KEY (first_idx)\n)",
    "CREATE TABLE merkle_heads (\n\tstream VARCHAR(400) NOT NULL, \n\tversion INTEGER NOT NULL, \n\t"
    "hash VARCHAR(64) NOT NULL, \n\tPRIMARY KEY (stream)\n)",
    "CREATE TABLE merkle_checkpoints (\n\tid INTEGER NOT NULL, \n\tsize INTEGER NOT NULL, \n\t"
    "root VARCHAR(64) NOT NULL, \n\theads_root VARCHAR(64) NOT NULL, \n\tnote TEXT NOT NULL, \n\t"
    "heads BLOB NOT NULL, \n\tPRIMARY KEY (id)\n)",
    "CREATE TRIGGER merkle_checkpoints_no_update BEFORE UPDATE ON merkle_checkpoints "
    "BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only: UPDATE refused'); END",
    "CREATE TRIGGER merkle_checkpoints_no_delete BEFORE DELETE ON merkle_checkpoints "
    "BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only: DELETE refused'); END",
    *(
        f"CREATE TRIGGER {table}_no_{verb} BEFORE {op} ON {table} {when}BEGIN SELECT RAISE(ABORT, "
        f"'the Merkle tree is append-only: {op} on {table} refused'); END"
        for table, verb, op, when in (
            ("merkle_nodes", "update", "UPDATE", ""),
            ("merkle_nodes", "delete", "DELETE", ""),
            ("merkle_runs", "update", "UPDATE", ""),
            ("merkle_runs", "delete", "DELETE", ""),
            ("merkle_heads", "rewind", "UPDATE", "WHEN NEW.stream <> OLD.stream OR NEW.version <= OLD.version "),
            ("merkle_heads", "delete", "DELETE", ""),
            (
                "merkle_state",
                "rewind",
                "UPDATE",
                "WHEN NEW.id <> OLD.id OR NEW.size < OLD.size OR NEW.last_seq < OLD.last_seq ",
            ),
            ("merkle_state", "delete", "DELETE", ""),
        )
    ),
    # The stored tree starts empty (the row the migration inserts).
    "INSERT INTO merkle_state (id, size, last_seq) VALUES (1, 0, 0)",
    "CREATE TABLE summary_position (\n\tid INTEGER NOT NULL, \n\tseq INTEGER NOT NULL, \n\tPRIMARY KEY (id)\n)",
    # An empty log: the summary reflects it whole.
    "INSERT INTO summary_position (id, seq) VALUES (1, 0)",
    "CREATE TABLE tag_figures (\n\ttag VARCHAR(400) NOT NULL, \n\tmetric VARCHAR(1) NOT NULL, \n\t"
    "game_id VARCHAR(400) NOT NULL, \n\tlevel INTEGER NOT NULL, \n\tretracted INTEGER NOT NULL, \n\t"
    "value FLOAT NOT NULL, \n\tlabel TEXT NOT NULL, \n\tn INTEGER NOT NULL, \n\t"
    "PRIMARY KEY (tag, metric, game_id, level, retracted, value, label)\n)",
    "CREATE TABLE copy_marks (\n\tsource VARCHAR(1000) NOT NULL, \n\tseq INTEGER NOT NULL, \n\t"
    "hash VARCHAR(64) NOT NULL, \n\tstreams INTEGER NOT NULL, \n\tPRIMARY KEY (source)\n)",
)


def create_fresh(con: sqlite3.Connection) -> bool:
    """Create the head schema on an empty database, in one transaction; False (nothing done) if the database is
    not empty or the migrations are newer than :data:`REVISION` (then Alembic must do it).

    ``con`` is in autocommit mode (``isolation_level=None``). IMMEDIATE: a second process creating the same new
    file waits for the first and then finds it not empty.
    """
    if head_revision() != REVISION:
        return False
    con.execute("BEGIN IMMEDIATE")
    try:
        if con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            con.execute("ROLLBACK")
            return False
        for stmt in STATEMENTS:
            con.execute(stmt)
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (REVISION,))
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return True

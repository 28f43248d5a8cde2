"""Soak runs of the long-lived processes, shared by ``tests/test_soak_*.py`` (CI sizes) and ``scripts/bench_soak.py``
(full sizes): a process's open descriptors, threads and resident memory read from ``/proc/PID`` while agents drive it.

``ledger serve`` runs as a real subprocess on 127.0.0.1 (optionally under a lower ``RLIMIT_NOFILE``, as ``ulimit -n``
sets it); agent threads play cards over the REST API, most requests on a new TCP connection (a new server thread
each: threads that come and go), some on a kept-alive one. Every answer's status
is kept with the request; every card the server closed with 200 is later exported from the ledger and compared.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LEDGER = str(ROOT / ".venv" / "bin" / "ledger")
ENV_DIR = ROOT / "tests" / "environment_files"
KEY = "soak-key"
GAME_IDS = ["cnt3-0000000a", "clk2-0000000b", "wkex-0000000f", "nobl-0000000c", "shrt-0000000e", "nbas-0000000d"]


@dataclass(frozen=True)
class Sample:
    """One reading of a process: after ``done`` requests (or page loads, or cards)."""

    done: int
    fds: int
    threads: int
    rss_kb: int


def sample(pid: int, done: int) -> Sample:
    """Open descriptors, threads and resident memory of process ``pid`` now."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return Sample(done, fds, int(fields["Threads"]), int(fields["VmRSS"].split()[0]))


def spread(samples: list[Sample], attr: str) -> int:
    """Largest minus smallest of one reading over ``samples``."""
    values = [getattr(s, attr) for s in samples]
    return max(values) - min(values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def limit_files(n: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` lowering the child's open-file limit to ``n`` (``ulimit -n n``)."""
    if n is None:
        return None

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return lower


class Server:
    """A ``ledger`` subprocess serving HTTP on 127.0.0.1 (``serve`` or ``view``), its stderr kept in a file.

    A file, not a pipe: Werkzeug writes a line per request there, and a pipe nobody reads fills up and stops the
    server in the middle of a request.
    """

    def __init__(self, args: list[str], port: int, ready_path: str, *, nofile: int | None = None) -> None:
        self.port = port
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the server runs; closed by stop()
        self.proc = subprocess.Popen(
            [LEDGER, *args], stdout=subprocess.DEVNULL, stderr=self.log, preexec_fn=limit_files(nofile)
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", ready_path)
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(f"ledger {' '.join(args[2:4])} did not start: {self.stop()[1][-2000:]}")

    def stop(self) -> tuple[int, str]:
        """Ctrl-C the process (killed if it does not stop in 60 s); its exit status and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.seek(0)
        err = self.log.read().decode(errors="replace")
        self.log.close()
        return self.proc.returncode, err


def start_serve(db: str, *, nofile: int | None = None) -> Server:
    """``ledger serve`` on a free loopback port."""
    port = free_port()
    args = ["--db", db, "serve", "--environments", str(ENV_DIR), "--port", str(port)]
    return Server(args, port, "/api/healthcheck", nofile=nofile)


def start_view(db: str) -> Server:
    """``ledger view`` on a free loopback port."""
    port = free_port()
    return Server(["--db", db, "view", "--port", str(port)], port, "/api/cards")


class Client:
    """REST requests to one server: each on a new TCP connection, or all on one kept alive (``keep_alive``)."""

    def __init__(self, port: int, *, keep_alive: bool = False) -> None:
        self.port = port
        self.keep_alive = keep_alive
        self._conn: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        conn = self._conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"X-API-Key": KEY, "Content-Type": "application/json"}
        if not self.keep_alive:
            headers["Connection"] = "close"
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self._conn = None
            raise
        if self.keep_alive:
            self._conn = conn
        else:
            conn.close()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode(errors="replace")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class Card:
    """What an agent was told about one card: every request's status, and the close answer."""

    card_id: str | None
    statuses: list[tuple[str, int]] = field(default_factory=list)
    #: The answers with a status of 500 or more, in order.
    errors: list[Any] = field(default_factory=list)
    close_status: int | None = None
    close_doc: Any = None

    def told(self, name: str, status: int, body: Any) -> None:
        self.statuses.append((name, status))
        if status >= 500:
            self.errors.append(body)


def play_card(client: Client, rng: random.Random, steps: int) -> Card:
    """Open a card, play one or two games for ``steps`` actions (RESET now and then), close it."""
    status, body = client.send("POST", "/api/scorecard/open", {"tags": ["soak"]})
    card = Card(body.get("card_id") if status == 200 and isinstance(body, dict) else None)
    card.told("open", status, body)
    if card.card_id is None:
        return card
    plays = []
    for gid in rng.sample(GAME_IDS, rng.choice([1, 2])):
        status, fr = client.send("POST", "/api/cmd/RESET", {"game_id": gid, "card_id": card.card_id})
        card.told("RESET", status, fr)
        if status == 200:
            plays.append({"game_id": gid, "guid": fr["guid"], "avail": fr["available_actions"]})
    for _ in range(steps if plays else 0):
        p = rng.choice(plays)
        # A RESET now and then, and after a refused action (the game ended: the server refuses until a RESET).
        refused = card.statuses[-1][1] != 200
        a = 0 if refused or rng.random() < 0.08 else rng.choice([*p["avail"], 1] if p["avail"] else [1])
        name = "RESET" if a == 0 else f"ACTION{a}"
        extra = {"x": rng.randint(0, 63), "y": rng.randint(0, 63)} if a == 6 else {}
        status, fr = client.send("POST", f"/api/cmd/{name}", {"game_id": p["game_id"], "guid": p["guid"], **extra})
        card.told(name, status, fr)
        if status == 200:
            p["avail"] = fr["available_actions"]
    card.close_status, card.close_doc = client.send("POST", "/api/scorecard/close", {"card_id": card.card_id})
    card.told("close", card.close_status, card.close_doc)
    return card


@dataclass
class Run:
    """A soak run's outcome: the cards, the samples, the requests sent."""

    cards: list[Card]
    samples: list[Sample]
    requests: int
    seconds: float


def drive_serve(
    pid: int,
    port: int,
    *,
    requests: int,
    agents: int = 4,
    steps: int = 30,
    samples: int = 20,
    seed: int = 0,
    on_card: Callable[[Card, int], bool] | None = None,
) -> Run:
    """``agents`` threads play cards of ``steps`` actions until ``requests`` requests were sent; the process is
    sampled ``samples`` times evenly over the run. ``on_card(card, requests so far)`` is called after each card
    (one at a time); returning True extends the run by another ``requests // 10`` requests (until a fault shows)."""
    cards: list[Card] = []
    taken: list[Sample] = [sample(pid, 0)]
    lock = threading.Lock()
    sent = [0]
    every = max(1, requests // samples)
    next_sample = [every]
    wanted = [requests]
    errors: list[BaseException] = []
    t0 = time.perf_counter()

    def agent(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        client = Client(port, keep_alive=i == 0)  # one agent keeps its connection: a thread for all its requests
        try:
            while True:
                with lock:
                    if sent[0] >= wanted[0]:
                        return
                card = play_card(client, rng, steps)
                with lock:
                    cards.append(card)
                    sent[0] += len(card.statuses)
                    while sent[0] >= next_sample[0]:
                        taken.append(sample(pid, sent[0]))
                        next_sample[0] += every
                    if on_card is not None and on_card(card, sent[0]) and sent[0] + agents * steps >= wanted[0]:
                        wanted[0] += max(requests // 10, agents * steps)
        except BaseException as e:
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    taken.append(sample(pid, sent[0]))
    return Run(cards, taken, sent[0], time.perf_counter() - t0)


def closed_cards_match(db: str, cards: list[Card]) -> list[str]:
    """Cards closed with 200 whose ledger export is not exactly the close answer (empty: all match)."""
    from ledger import Ledger
    from ledger.errors import LedgerError

    wrong = []
    with Ledger.open(db, readonly=True) as led:
        for c in cards:
            if c.close_status != 200 or c.card_id is None:
                continue
            try:
                if json.loads(led.export(c.card_id)) != c.close_doc:
                    wrong.append(f"{c.card_id}: export differs from the close answer")
            except LedgerError as e:
                wrong.append(f"{c.card_id}: {e}")
    return wrong


def view_pages(pid: int, port: int, card_ids: list[str], *, loads: int, samples: int = 20) -> list[Sample]:
    """``loads`` page loads of ``ledger view`` (cards list, card pages and their JSON, compare), sampled."""
    paths = ["/", "/api/cards"]
    for c in card_ids:
        paths += [f"/card?id={c}", f"/api/card?id={c}"]
    if len(card_ids) >= 2:
        paths.append(f"/compare?card={card_ids[0]}&card={card_ids[1]}")
    every = max(1, loads // samples)
    taken = [sample(pid, 0)]
    client = Client(port)
    for i in range(1, loads + 1):
        path = paths[i % len(paths)]
        status, body = client.send("GET", path)
        if status != 200 or (path.startswith("/card?") and path.split("=", 1)[1] not in str(body)):
            raise AssertionError(f"{path} answered {status}: {str(body)[:300]}")
        if i % every == 0:
            taken.append(sample(pid, i))
    return taken

"""What the kill and soak runs share: the real ``herald run`` under a steady load through the Telegram fake and
the web API, a model that answers after 50-300 ms (some turns with a terminal call whose side effect lands in a
log, once per execution), a cron job that delivers into a web chat, and the ledger that says what was lost or
doubled.

Every question is a short id (``t3-17``: Telegram chat 3, its 18th message; ``w…`` for web chats) and every
answer names it (``answer: t3-17``), so an answer counts against the right question however late it comes.
A tool turn runs ``echo <id> >> tools.log`` in the workspace: a line there is one execution.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gateway.outbound.delivery import MAYBE_REPEATED
from tests.e2e.conftest import API_KEY, HERALD_BIN, REPO, Herald, base_config, deep_merge
from tests.fakes.llm import FakeLLMThread, Reply, Step, ToolCall, last_user_message, message_text
from tests.fakes.telegram_api import FakeTelegramThread

QUESTION = re.compile(r"\b([tw]\d+-\d+)\b")
ANSWER = re.compile(r"^answer: ([tw]\d+-\d+)$")
FIRST_TG_CHAT = 50_000
CRON_CHAT = "cronchat"
CRON_TOKEN = re.compile(r"cron-(\d+)")
# What the bot may say besides answers: a busy chat's queue notice, and the warning before a chunk whose send a
# kill cut off is sent again (the platform cannot de-duplicate it: gateway/outbound/delivery.py).
NOTICES = ("⏳ Queued", MAYBE_REPEATED)


def question_of(text: str) -> str | None:
    m = QUESTION.search(text)
    return m.group(1) if m else None


def index_of(question: str) -> int:
    return int(question.rpartition("-")[2])


def load_model(seed: int = 0, delay: tuple[float, float] = (0.05, 0.3)) -> FakeLLMThread:
    """The scripted model: after ``delay`` seconds, a terminal call for a question marked ``tool`` (when tools are
    offered and the last message is the user's), else ``answer: <id>`` — also after a tool result, whatever
    it says (a resumed turn's "outcome unknown" included)."""
    llm = FakeLLMThread()
    rng = random.Random(seed)
    lock = threading.Lock()

    def responder(request: dict[str, Any]) -> Step:
        with lock:
            wait = rng.uniform(*delay)
        messages = request.get("messages") or []
        last = messages[-1] if messages else {}
        text = message_text(last_user_message(request))
        question = question_of(text) or "?"
        if last.get("role") == "user" and request.get("tools") and " tool" in text:
            return ToolCall("terminal", {"command": f"echo {question} >> tools.log"}, delay=wait)
        return Reply(f"answer: {question}", delay=wait)

    llm.responder = responder
    return llm


@dataclass
class Ledger:
    """What was asked per chat, in order, and what the checks found."""

    asked: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, chat: str, question: str) -> None:
        with self.lock:
            self.asked.setdefault(chat, []).append(question)

    def total(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.asked.values())


@dataclass
class Verdict:
    asked: int
    answered: int
    lost: list[str]
    doubled: list[str]  # answered twice with no warning in between
    announced: list[str]  # answered again after "may repeat" (a send a kill cut off, on a platform without
    #                       idempotent sends): Herald's documented at-least-once for that one chunk
    out_of_order: list[str]  # chats whose answers came in another order than their questions
    strays: list[str]  # texts the bot sent that answer no question of that chat
    tool_runs: int
    tool_doubled: list[str]

    def problems(self) -> list[str]:
        out = []
        for name in ("lost", "doubled", "out_of_order", "strays", "tool_doubled"):
            value = getattr(self, name)
            if value:
                out.append(f"{name}: {value[:20]}{' ...' if len(value) > 20 else ''} ({len(value)})")
        return out


def judge(asked: dict[str, list[str]], answers: dict[str, list[str]], tool_log: str) -> Verdict:
    """Each chat's answers (texts, in the order the platform got them) against its questions."""
    lost, doubled, announced, disorder, strays = [], [], [], [], []
    answered = 0
    for chat, questions in asked.items():
        got: list[str] = []
        warned = False  # a "may repeat" warning since the last answer
        counts: Counter[str] = Counter()
        for text in answers.get(chat, []):
            if text == MAYBE_REPEATED:
                warned = True
                continue
            if text.startswith(NOTICES):
                continue
            m = ANSWER.match(text)
            if m is None or m.group(1) not in questions:
                strays.append(f"{chat}: {text[:80]}")
                continue
            q = m.group(1)
            if counts[q]:
                (announced if warned else doubled).append(q)
            counts[q] += 1
            got.append(q)
            warned = False
        lost += [q for q in questions if counts[q] == 0]
        answered += sum(1 for q in questions if counts[q] >= 1)
        firsts = list(dict.fromkeys(got))
        inversions = [f"{a} before {b}" for a, b in itertools.pairwise(firsts)
                      if questions.index(a) > questions.index(b)]
        if inversions:
            disorder.append(f"{chat}: {', '.join(inversions[:3])}")
    lines = [line.strip() for line in tool_log.splitlines() if line.strip()]
    tool_doubled = sorted(q for q, n in Counter(lines).items() if n > 1)
    return Verdict(sum(len(q) for q in asked.values()), answered, lost, doubled, announced, disorder, strays,
                   len(lines), tool_doubled)


class Rig:
    """The daemon (restartable, killable), the Telegram fake and the model, and the clients for both doors."""

    def __init__(self, home: Path, *, tg_chats: int = 10, web_chats: int = 10, cron_every: float | None = 2,
                 config: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.tg = FakeTelegramThread()
        self.llm = load_model(seed)
        self.tg_chats = [FIRST_TG_CHAT + n for n in range(tg_chats)]
        self.web_chats = [f"w{n}" for n in range(web_chats)]
        self.cron_every = cron_every
        self.cron_job: str | None = None
        self.ledger = Ledger()
        self.kills = 0
        self._extra = config or {}
        self.home = home
        self.herald: Herald | None = None

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> Herald:
        self.tg.start()
        self.llm.start()
        cfg = deep_merge(base_config(self.llm), {
            "model": {"max_retries": 2},
            "approvals": {"mode": "off"},
            "tools": {"terminal": {"enabled": True, "sandbox": "none"}},
            # The queue bound refuses new messages plainly when a chat is swamped; this load swamps chats on purpose
            # (a restart every second or two), and what is under test is that nothing accepted is lost. The kills
            # come from outside and may land in the same message's turn again and again: no message here is poison
            # (gateway.max_attempts would set one aside after its third).
            "gateway": {"max_concurrent_turns": 16, "max_queue": 1000, "max_attempts": 1000},
            "cron": {"min_interval_seconds": 1, "poll_seconds": 1},
            "platforms": {"telegram": {"enabled": True, "base_url": self.tg.base_url,
                                       "allowed_users": self.tg_chats}},
        })
        cfg = deep_merge(cfg, self._extra)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HERALD_", "PYTEST_XDIST", "TELEGRAM_", "DISCORD_", "SLACK_"))}
        env.update(HERALD_HOME=str(self.home), TEST_KEY=API_KEY, PYTHONUNBUFFERED="1",
                   TELEGRAM_BOT_TOKEN=self.tg.token, XDG_STATE_HOME=str(self.home / "state"))
        self.herald = Herald(home=self.home, config=cfg, env=env)
        if self.cron_every:
            self.herald.write_config()
            self.cron_job = self._add_cron_job()
        self.herald.start()
        return self.herald

    def _add_cron_job(self) -> str:
        assert self.herald is not None
        res = self.cli("add", "--schedule", f"every {self.cron_every:g}s", "--name", "tick", "--no-agent",
                       "--script", "echo cron-$(date +%s%N)", "--deliver", f"web:{CRON_CHAT}")
        assert res.returncode == 0, res.stderr
        return res.stdout.split()[0]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.herald is not None
        return subprocess.run([str(HERALD_BIN), "cron", *args], cwd=REPO, env=self.herald.env, capture_output=True,
                              text=True, timeout=60)

    def kill(self) -> None:
        """SIGKILL, no warning, then a fresh process on the same home."""
        herald = self.herald
        assert herald is not None and herald.proc is not None
        herald.proc.send_signal(signal.SIGKILL)
        herald.proc.wait(10)
        herald.close_files()
        self.kills += 1
        herald.start()

    def stop(self) -> int:
        code = self.herald.stop() if self.herald is not None and self.herald.proc is not None else 0
        self.tg.stop()
        self.llm.stop()
        return code

    # ---- the two doors -----------------------------------------------------------------------------

    def ask_telegram(self, chat: int, question: str, tool: bool = False) -> None:
        text = f"{question} tool" if tool else question
        self.ledger.add(str(chat), question)
        self.tg.call(lambda f: f.user_message(chat, chat, text))

    def ask_web(self, chat: str, question: str, tool: bool = False, give_up_after: float = 60.0) -> None:
        """POST until it is accepted (202), the same message id each time, as a client that lost the answer to
        a request does: the daemon may be down, or killed between taking the message and answering."""
        text = f"{question} tool" if tool else question
        self.ledger.add(chat, question)
        body = json.dumps({"chat_id": chat, "user_id": "tester", "text": text, "message_id": question}).encode()
        deadline = time.monotonic() + give_up_after
        while True:
            assert self.herald is not None
            with contextlib.suppress(OSError, ValueError):
                req = urllib.request.Request(self.herald.base + "/api/v1/messages", data=body, method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {self.herald.token}"})
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        if resp.status == 202:
                            return
                except urllib.error.HTTPError:
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"web message {question} was never accepted")
            time.sleep(0.05)

    # ---- what arrived ------------------------------------------------------------------------------

    def web_history(self, chat: str) -> list[dict[str, Any]]:
        assert self.herald is not None
        resp = self.herald.get(f"/api/v1/chats/{quote(chat, safe='')}/messages", timeout=30)
        assert resp.status == 200, (resp.status, resp.body)
        return resp.body["messages"]

    def answers(self) -> dict[str, list[str]]:
        """chat -> the bot's texts in arrival order (Telegram: at the fake; web: the chat's history)."""
        out: dict[str, list[str]] = {}
        for chat, text in self.tg.call(lambda f: [(m.chat_id, m.text) for m in f.sent]):
            out.setdefault(str(chat), []).append(text)
        for chat in [*self.web_chats, CRON_CHAT]:
            out[chat] = [m["text"] for m in self.web_history(chat) if m["role"] == "assistant"]
        return out

    def tool_log(self) -> str:
        path = self.home / "workspace" / "tools.log"
        return path.read_text() if path.exists() else ""

    def all_answered(self) -> bool:
        answers = self.answers()
        for chat, questions in list(self.ledger.asked.items()):
            got = {m.group(1) for t in answers.get(chat, []) if (m := ANSWER.match(t))}
            if not set(questions) <= got:
                return False
        return True

    def wait_answered(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, AssertionError):
                if self.all_answered():
                    return True
            time.sleep(0.25)
        return False

    def pause_cron(self, settle: float = 15.0) -> None:
        """No new runs, and the last ones delivered: what the chat shows can be held against the history."""
        if self.cron_job is None:
            return
        assert self.cli("pause", self.cron_job).returncode == 0
        time.sleep(1.5)  # a run claimed just before the pause reached the daemon finishes
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            if not any(r["status"] == "ok" and r["delivery_status"] not in ("delivered", "failed", "none", "silent")
                       for r in self.cron_runs()):
                return
            time.sleep(0.2)

    def cron_runs(self) -> list[dict[str, Any]]:
        assert self.cron_job is not None
        res = self.cli("history", self.cron_job, "--json", "--limit", "100000")
        assert res.returncode == 0, res.stderr
        return list(reversed(json.loads(res.stdout)))


class Load:
    """A steady stream of questions: ``rate`` messages a second over all chats, round robin; every
    ``tool_every``-th message of a chat asks for a tool call. Telegram and web each send from their own thread,
    so a web POST waiting for a restarted daemon does not hold Telegram's users back."""

    def __init__(self, rig: Rig, rate: float = 20.0, tool_every: int = 4) -> None:
        self.rig = rig
        self.rate = rate
        self.tool_every = tool_every
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._guard, args=(self._telegram,), daemon=True),
                         threading.Thread(target=self._guard, args=(self._web,), daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self._threads:
            t.join(90)

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def _pace(self, chats: int, total: int) -> float:
        return total / self.rate / max(1, chats) if chats else 1.0

    def _telegram(self) -> None:
        chats = self.rig.tg_chats
        self._loop(len(chats), lambda n, i: self.rig.ask_telegram(chats[n], f"t{n}-{i}", self._tool(i)))

    def _web(self) -> None:
        chats = self.rig.web_chats
        self._loop(len(chats), lambda n, i: self.rig.ask_web(chats[n], f"w{n}-{i}", self._tool(i)))

    def _tool(self, i: int) -> bool:
        return self.tool_every > 0 and i % self.tool_every == self.tool_every - 1

    def _loop(self, chats: int, ask: Callable[[int, int], None]) -> None:
        if not chats:
            return
        total = len(self.rig.tg_chats) + len(self.rig.web_chats)
        gap = total / (self.rate * chats)  # this door's share of the rate: its share of the chats
        i = 0
        nxt = time.monotonic()
        while not self.stopping.is_set():
            for n in range(chats):
                if self.stopping.is_set():
                    return
                ask(n, i)
                nxt += gap
                time.sleep(max(0.0, nxt - time.monotonic()))
            i += 1


def cron_problems(runs: list[dict[str, Any]], deliveries: list[str], every: float) -> tuple[list[str], dict[str, int]]:
    """Doubles and gaps in the job's history, and each finished run's delivery against the chat.

    Doubled: two scheduled runs for one due time, or one output delivered twice. Missing: a run that finished
    ``ok`` whose result never reached the chat, or a delivery no run produced. A due time that passed while the
    daemon was down is fast-forwarded by design (cron/scheduler.py: the latest one within the catch-up window
    runs once, no burst), so gaps are only counted, not failed.
    """
    problems: list[str] = []
    scheduled = [r for r in runs if r.get("trigger") == "scheduled"]
    dues = Counter(r["due_at"] for r in scheduled)
    problems += [f"due time {d} ran {n} times" for d, n in dues.items() if n > 1]
    delivered = Counter(m.group(0) for text in deliveries for m in CRON_TOKEN.finditer(text))
    outputs = {}
    for r in runs:
        m = CRON_TOKEN.search(r.get("output") or "")
        if m:
            outputs[m.group(0)] = r
    problems += [f"{tok} delivered {n} times" for tok, n in delivered.items() if n > 1]
    problems += [f"{tok} delivered but no run produced it" for tok in delivered if tok not in outputs]
    for tok, r in outputs.items():
        if r["status"] == "ok" and delivered[tok] == 0:
            problems.append(f"run {r.get('id')} ({tok}) finished ok, delivery {r.get('delivery_status')}, "
                            "never reached the chat")
    # A run killed mid-run has no result: its chat is told so, once (the notice its claim carried).
    cut = [r for r in runs if r["status"] == "failed" and (r.get("error") or "").startswith("interrupted")]
    told = [r for r in cut if r.get("delivery_status") == "delivered"]
    notices = sum("interrupted: Herald stopped" in text for text in deliveries)
    if notices != len(told):
        problems.append(f"{notices} interrupted-run notices in the chat for {len(told)} delivered "
                        f"({len(cut)} runs interrupted)")
    ordered = sorted(dues)
    gaps = sum(1 for a, b in itertools.pairwise(ordered) if b - a > every * 1.5)
    stats = {"runs": len(runs), "scheduled": len(scheduled), "delivered": sum(delivered.values()),
             "gaps": gaps, "ok": sum(r["status"] == "ok" for r in runs), "interrupted": len(cut),
             "interrupted_told": notices}
    return problems, stats

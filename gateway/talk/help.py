"""What /help says beyond the commands: the agent's tools for taking part in the conversation, and what a
message sent while it works (or an edit) does — from the configuration as it is, so it never promises a tool
that is off."""

from __future__ import annotations

from gateway.config import Config
from gateway.platforms.base import Capabilities

TOOLS = {
    "clarify": "asks you a question (with choices) and waits for your answer: tap a choice or type one",
    "send_message": "sends a message to another chat (a platform's home chat, or platform:chat_id); anywhere "
                    "but here it asks you first",
    "web_fetch": "reads a page from the internet",
    "web_search": "searches the internet",
}
BUSY = {
    "queue": "a message you send while I work waits until I have answered",
    "interrupt": "a message you send while I work stops the current answer and is answered instead",
    "steer": "a message you send while I work is added to what I'm doing: I read it before my next step",
}
OLD_EDITS = {"ignore": "ignored", "steer": "passed to what I'm doing", "new_turn": "answered as a new message"}


def about(cfg: Config, tools_on: list[str], caps: Capabilities) -> str:
    """The lines /help adds after the commands (``tools_on``: the agent's tools)."""
    lines = ["", "Besides answering, I can use these:"]
    for name, what in TOOLS.items():
        state = "" if name in tools_on else " (off here)"
        lines.append(f"{name} — {what}{state}")
    lines += ["", f"While I work: {BUSY[cfg.gateway.busy_mode]}; {caps.command('steer', 'text')} adds to what I'm "
                  "doing in any case.",
              f"Edits: an edit before I start on a message replaces it, one while I work on it is passed on as a "
              f"correction, one of an older message is {OLD_EDITS[cfg.gateway.on_edit]}."]
    return "\n".join(lines)

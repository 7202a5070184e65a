"""Reading a JSON body from anyone who can reach the daemon's http port, refusing what it cannot store.

Every refusal is a 400 with a plain reason (``{"error": ...}``), counted as the fault ``bad_request`` by the
http app: a body that is not UTF-8, not JSON, nested deeper than the decoder's stack (100 000 ``[`` raise
RecursionError, not ValueError), not an object, or holding text no database takes — a lone surrogate (a
``"\\ud800"`` escape decodes to a str that UTF-8 cannot encode) or a NUL character (PostgreSQL's text and
json reject it). Caught here, none of these reaches a handler, so none can become a 500 deeper in.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

# A lone surrogate, or a NUL: what no UTF-8 text column (and no PostgreSQL text at all) can hold.
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def bad_request(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def unstorable(value: Any) -> bool:
    """True when a string anywhere in ``value`` (a decoded JSON document) has a lone surrogate or a NUL."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def clean_text(text: str) -> str:
    """Platform text made storable: a lone surrogate becomes U+FFFD, a NUL is dropped. For what a platform
    hands over (it cannot be refused with a 400 there); HTTP callers are refused instead (``read_object``)."""
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def parse_object(raw: bytes | str) -> dict[str, Any]:
    """``raw`` as a JSON object, or ``HTTPBadRequest`` saying what is wrong with it."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise bad_request("the body must be UTF-8 text") from None
    try:
        body = json.loads(text)
    except RecursionError:
        raise bad_request("the body is nested too deeply") from None
    except ValueError:
        raise bad_request("the body must be JSON") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    if unstorable(body):
        raise bad_request("the body must be valid Unicode text without NUL characters or lone surrogates")
    return body


async def read_object(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body (see ``parse_object``); the app's client_max_size bounds its size."""
    return parse_object(await request.read())

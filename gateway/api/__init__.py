"""The OpenAI-compatible API (``api.enabled``): ``/v1/models``, ``/v1/chat/completions`` and the subset of
``/v1/responses`` clients use, on the daemon's HTTP server, so Open WebUI, LibreChat or any program on the
``openai`` SDK talks to the agent — its tools, memory, cron and approvals.

A request becomes a turn on the road every chat message takes: the adapter (adapter.py, a ``PlatformAdapter``
named ``api`` that the runner adds when the section is enabled) turns it into an ``InboundMessage`` whose sender is
the key's holder (``api:<name>``, keys in gateway/storage/api_keys.py) and whose chat is the conversation
(conversations.py: pinned by ``X-Herald-Session`` or ``previous_response_id``, else the client's user and first
message; the history a client resends is checked against the stored one, and an edit forks). It is accepted into
the inbox, waits in its session's lane and is answered by the turn executor; delivery hands the answer back to the
request waiting for it (exchange.py), and a streamed request gets the text as the model writes it
(gateway/outbound/streaming/direct.py). wire.py speaks OpenAI's JSON and events, limits.py counts each key's
requests. A feature beside approvals and cron: it uses the layers below and nothing below imports it.
"""

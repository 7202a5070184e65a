"""The agent core: the synchronous agent loop (model call, tool calls, repeat), the OpenAI-compatible client
with retries, error classification and fallbacks (``http``: the HTTP client under it), the prompt, token
estimates and usage, and compression of a long conversation; the ``openai`` SDK itself comes through ``sdk``
(its types loaded as they are used).

Knows nothing of platforms or asyncio; imports ``tools`` only. The gateway runs it in worker threads and talks
to it through callbacks (progress, approval, stop).
"""

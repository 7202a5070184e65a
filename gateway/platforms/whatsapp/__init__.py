"""WhatsApp through Meta's Cloud API (the Graph API over aiohttp; no unofficial web-client bridge): adapter
(lifecycle, the webhook at /whatsapp/webhook, statuses, presses), inbound (verifying and reading webhooks),
outbound (text, reply buttons and lists, templates outside the 24-hour window, files, typing and read
receipts), window (each person's 24-hour customer-service window, kept across restarts), markup (markdown ->
WhatsApp's *bold* _italic_ ~strike~ ```code```), transport (the Graph API client, its errors in the delivery
layer's terms), config. Importing this package imports nothing heavy: the config loader reads ``config`` alone."""

from gateway.platforms.declaration import Declaration

PLATFORM = Declaration(
    adapter="adapter:WhatsAppAdapter", config="config:WhatsAppConfig", label="WhatsApp",
    # Meta's access tokens (user, system user, page) start with EAA.
    secret_patterns=(r"\bEAA[A-Za-z0-9]{20,}+",),
)

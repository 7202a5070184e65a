"""Telegram through python-telegram-bot's ``Bot``: adapter (lifecycle, polling, webhook), inbound
(normalising updates), outbound (rendering, sending, editing), transport (PTB on aiohttp, error mapping).
Importing this package imports neither PTB nor the adapter: the config loader reads ``config`` alone."""

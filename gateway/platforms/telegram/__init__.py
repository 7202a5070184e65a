"""Telegram through python-telegram-bot's ``Bot``: adapter (lifecycle, polling, webhook), inbound
(normalising updates), outbound (rendering, sending, editing), transport (PTB on aiohttp, error mapping).
Importing this package imports neither PTB nor the adapter: the config loader reads ``config`` alone."""

from gateway.platforms.declaration import Declaration

PLATFORM = Declaration(
    adapter="adapter:TelegramAdapter", config="config:TelegramConfig", label="Telegram",
    noisy_loggers=("telegram",),
    secret_patterns=(
        # Bot tokens "<bot id>:<secret>", also inside https://api.telegram.org/bot<token>/method. Real ones have
        # 35 characters after the colon; test and self-hosted servers' can be shorter, so 20 is the floor. The
        # id must start a word (or follow "bot"): "sha256:<hex>" is a digest, not a token. The secret part must
        # hold an upper-case letter or a digit, as random base64 always does, so that
        # "12345:some_function_name_here" is left alone; times (12:30:45) and IPv6 groups are too short.
        r"(?:(?<![A-Za-z0-9])|(?<=bot))\d{3,}+:(?=[a-z_-]*+[A-Z0-9])[A-Za-z0-9_-]{20,}+",
    ),
    starter="enabled: false\n"
            "token_env: TELEGRAM_BOT_TOKEN   # give each profile its own bot: one token is driven by one Herald\n"
            "allowed_users: []",
)

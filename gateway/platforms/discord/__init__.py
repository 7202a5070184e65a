"""Discord through discord.py: adapter (lifecycle, gateway events, slash commands, presses), inbound (normalising
messages and interactions), outbound (rendering, sending, editing), interactions (acknowledged at once, answered
later), backfill (per-channel cursors; what was posted while the bot was away), transport (discord.py pointed at
the API, error mapping), config. Importing this package imports neither discord.py nor the adapter: the config
loader reads ``config`` alone."""

from gateway.platforms.declaration import Declaration

# A bot token is three base64url parts joined by dots: the shape of a JWT, which the log redaction masks
# whatever the platform (gateway/kernel/logs.py).
PLATFORM = Declaration(
    adapter="adapter:DiscordAdapter", config="config:DiscordConfig", label="Discord",
    noisy_loggers=("discord",),
)

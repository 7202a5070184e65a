"""Slack through slack-bolt and slack_sdk: adapter (lifecycle, Socket Mode, HTTP mode, acks), inbound
(normalising events, presses, /herald), outbound (sending, editing, the working reaction), mrkdwn (markdown ->
mrkdwn), transport (the Web API client, error mapping), config. Importing this package imports neither SDK
nor the adapter: the config loader reads ``config`` alone."""

from gateway.platforms.declaration import Declaration

PLATFORM = Declaration(
    adapter="adapter:SlackAdapter", config="config:SlackConfig", label="Slack",
    noisy_loggers=("slack_bolt", "slack_sdk"),
    # Bot, user and app-level tokens.
    secret_patterns=(r"\bxox[abposr]-[A-Za-z0-9-]{10,}+", r"\bxapp-[A-Za-z0-9-]{10,}+"),
)

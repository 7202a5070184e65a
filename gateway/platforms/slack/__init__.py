"""Slack through slack-bolt and slack_sdk: adapter (lifecycle, Socket Mode, HTTP mode, acks), inbound
(normalising events, presses, /herald), outbound (sending, editing, the working reaction), mrkdwn (markdown ->
mrkdwn), transport (the Web API client, error mapping), config. Importing this package imports neither SDK
nor the adapter: the config loader reads ``config`` alone."""

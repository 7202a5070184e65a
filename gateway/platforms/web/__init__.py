"""The local web chat: a JSON API + SSE on the daemon's http app, behind a bearer token."""

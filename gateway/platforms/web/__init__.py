"""The local web chat: a page (static/index.html) and a JSON API + SSE on the daemon's http app, behind a
bearer token that also guards the rest of the HTTP API (the dashboard's data, /api/v1/status)."""

from gateway.platforms.declaration import Declaration

PAGE = "/"
TOKEN_FILE = "web_token"  # in the profile's home, unless platforms.web.token_env names a variable

PLATFORM = Declaration(
    adapter="adapter:WebAdapter", config="config:WebConfig", label="web chat",
    home_files=(("web token", TOKEN_FILE),),
    page=PAGE,
    guards_api=True,  # whoever holds its token is the owner: of the chat, the dashboard and the API
    starter="enabled: true",
)

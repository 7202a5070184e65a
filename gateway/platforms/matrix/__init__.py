"""Matrix through matrix-nio (the client-server API, end-to-end encryption with vodozemac): adapter (lifecycle,
login, E2E), sync (the /sync loop and its token's rule), inbound (events into messages and presses), outbound
(HTML answers, edits, reactions as buttons and as "working", files), markup (markdown -> Matrix HTML), session
(the device's login kept in the profile), transport (the nio client, errors, media), config. Importing this
package imports neither nio nor the adapter: the config loader reads ``config`` alone."""

from gateway.platforms.declaration import Declaration

SESSION_FILE = "matrix-session.json"  # the device a password login made (its token), and the key store's key
STORE_DIR = "matrix-store"  # nio's end-to-end key store (SQLite), with encryption: true

PLATFORM = Declaration(
    adapter="adapter:MatrixAdapter", config="config:MatrixConfig", label="Matrix",
    noisy_loggers=("nio", "peewee"),
    secret_patterns=(
        # Synapse's access tokens (syt_<user>_<random>_<crc>), and the Matrix Authentication Service's
        # access and compatibility tokens.
        r"\b(?:syt|mat|mct)_[A-Za-z0-9_]{16,}+",
        # Older Synapse tokens are macaroons: base64 of "MDAx..." ("0001" location header), long.
        r"\bMDAx[A-Za-z0-9+/=_-]{40,}+",
    ),
    home_files=(("Matrix device session", SESSION_FILE), ("Matrix key store", STORE_DIR)),
    starter="enabled: false\n"
            "homeserver: null        # e.g. https://matrix.example.org\n"
            "user_id: null           # the bot's account, e.g. @herald:example.org\n"
            "access_token_env: MATRIX_ACCESS_TOKEN\n"
            "allowed_users: []       # e.g. @you:example.org",
)

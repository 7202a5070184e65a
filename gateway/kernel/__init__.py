"""The kernel: leaves every layer may use. The config base model, the fault ledger, logging and secret
redaction, health and metrics, the helpers that read untrusted input (JSON bodies, inbound text), chunking
of rendered text, the helpers that show a command to a person (secrets masked, code spans kept), how a
message names its files (attached), the C heap's settings for a many-threaded daemon (memory), and importing
a library without the optional extras it would load for nothing (imports).

Nothing here imports anything else of ``gateway``: a platform, the store and the runner all stand on it.
"""

"""Sessions: the session key of a source (platform, scope, chat, thread, user), the session manager (reset
policies, lineage, the cached system prompt), history as the model sees it, per-session settings, and search
over past conversations.

May import the kernel, storage, the config and the platform contract; nothing that runs turns or sends.
"""

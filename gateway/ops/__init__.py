"""Operating the daemon: the HTTP app (health, readiness, metrics, adapters' routes), the dashboard,
systemd notification and service install, ``herald doctor`` and the start-up checks (preflight), and the
file modes of the state folder.

May import anything below the runner; the runner and the CLI use it.
"""

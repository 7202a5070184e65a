"""The cluster: several daemons on one database. Instance rows and heartbeats, session leases, the bus
between instances (PostgreSQL LISTEN/NOTIFY, or nothing for one process), and credential locks (one
poller per bot token, across processes and hosts).

May import the kernel and storage; never inbound, turns or outbound.
"""

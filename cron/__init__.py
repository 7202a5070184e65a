"""Scheduled jobs: schedule parsing, the job store, the scheduler (APScheduler, one claim per due time across
instances), the ``cronjob`` tool's API, the ``/cron`` command, and delivery of a run's result to its targets.

A due job becomes a turn in its own cron session and takes the same road as a chat message from there; cron
stands beside approvals and ops, over the gateway's storage, cluster, commands and outbound packages.
"""

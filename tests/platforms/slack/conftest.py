"""The Slack runner factory (defined with the end-to-end tests in test_slack.py), shared with the other Slack
test modules."""

from tests.platforms.slack.test_slack import start_slack  # noqa: F401 - a fixture, found by its name

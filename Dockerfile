# Herald messaging gateway. Build: docker build -t herald .   Run: see deploy/README.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HERALD_HOME=/data

RUN groupadd --system herald \
 && useradd --system --gid herald --home-dir /data --shell /usr/sbin/nologin herald

# bubblewrap: the sandbox around the agent's commands (README, "The sandbox"). Docker's default
# seccomp and AppArmor profiles and its masked /proc paths stop it from building that sandbox, so run
# the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined
# --security-opt systempaths=unconfined (deploy/README.md); otherwise the terminal tool stays off.
# socat: the bridge from a command's own network namespace to the egress proxy (a Python bridge is the
# fallback, ~12 ms slower per command).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap socat \
 && rm -rf /var/lib/apt/lists/*

# Only what the wheel is built from, so edits to tests or docs do not invalidate this layer.
WORKDIR /src
COPY pyproject.toml README.md requirements-run.lock ./
COPY gateway ./gateway
COPY agent_core ./agent_core
COPY tools ./tools
COPY cron ./cron
# The daemon's dependencies at the locked versions and hashes (no test tools), then Herald itself.
RUN pip install -r requirements-run.lock && pip install --no-deps . && rm -rf /src

# Inside a container the server must listen on all interfaces (http.host defaults to 127.0.0.1,
# which is unreachable through a published port). This file is copied into a new named volume on
# first use; a host directory mounted on /data needs its own config.yaml saying the same.
RUN install -d -o herald -g herald -m 0700 /data \
 && printf 'http:\n  host: 0.0.0.0\n  port: 8650\n' > /data/config.yaml \
 && chown herald:herald /data/config.yaml && chmod 0600 /data/config.yaml

# Declared after /data is populated: changes to a volume path after VOLUME are discarded.
VOLUME ["/data"]
USER herald
WORKDIR /data
EXPOSE 8650

# Assumes http.port 8650; change it together with EXPOSE if you move the port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8650/healthz', timeout=4)"]

# SIGTERM drains running turns for up to gateway.drain_seconds (30 s): stop with `docker stop -t 45`.
STOPSIGNAL SIGTERM
CMD ["herald", "run"]

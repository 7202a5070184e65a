"""The systemd unit Herald runs under, written by ``herald service install`` (deploy/systemd/herald.service is
this module's output for the default system install; tests/ops/test_systemd.py keeps the two equal).

Two kinds:

- ``system``: /etc/systemd/system/herald[-PROFILE].service, running as a user of its own (``herald``) with its
  state in /var/lib/herald (StateDirectory=) and the full hardening below, adjusted so bubblewrap can still
  build the agent's sandbox (user and mount namespaces, a fresh /proc).
- ``user``: ~/.config/systemd/user/herald[-PROFILE].service, running as you with your $HERALD_HOME. A user
  manager cannot apply most filesystem protections without putting the service into a user namespace of
  its own, so only what needs no privilege is kept; the agent's commands are still in bubblewrap.

Both are ``Type=notify`` with a watchdog: Herald says READY=1 once its store is open and every enabled adapter
tried to connect, pings WATCHDOG=1 from its event loop, and says STOPPING=1 when it starts draining
(gateway/ops/systemd.py).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["system", "user"]

SYSTEM_DIR = Path("/etc/systemd/system")
SYSTEM_HOME = "/var/lib/herald"
WATCHDOG_SEC = 30
START_TIMEOUT_SEC = 90


def unit_name(profile: str | None) -> str:
    return f"herald-{profile}.service" if profile and profile != "default" else "herald.service"


def user_unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "systemd" / "user"


def herald_executable() -> str:
    """This installation's ``herald`` (beside the running Python: the virtualenv it lives in)."""
    beside = Path(sys.executable).with_name("herald")
    if beside.exists():
        return str(beside)
    return str(Path(sys.argv[0]).absolute())


@dataclass(frozen=True)
class Unit:
    kind: Kind
    exec_start: str
    profile: str | None = None
    run_as: str = "herald"  # system units only
    home: str = SYSTEM_HOME  # HERALD_HOME

    @property
    def name(self) -> str:
        return unit_name(self.profile)

    def render(self) -> str:
        profile = self.profile if self.profile and self.profile != "default" else None
        title = "Herald messaging gateway for an LLM agent" + (f" (profile {profile})" if profile else "")
        env = [f"Environment=HERALD_HOME={self.home}"]
        if profile:
            env.append(f"Environment=HERALD_PROFILE={profile}")
        exec_start = f'"{self.exec_start}"' if any(c.isspace() for c in self.exec_start) else self.exec_start
        if self.kind == "system":
            from gateway.platforms import home_files

            state = ", ".join(["config.yaml", ".env", "state.db", "logs/", *(name for _, name in home_files())])
            return _SYSTEM.format(title=title, run_as=self.run_as, exec_start=exec_start, env="\n".join(env),
                                  watchdog=WATCHDOG_SEC, ping=WATCHDOG_SEC // 3,
                                  start_timeout=START_TIMEOUT_SEC, state=state)
        return _USER.format(title=title, exec_start=exec_start, env="\n".join(env), watchdog=WATCHDOG_SEC,
                            ping=WATCHDOG_SEC // 3, start_timeout=START_TIMEOUT_SEC)


_NOTIFY = """\
# notify: systemd calls Herald started when it says READY=1 (its database open and every enabled platform
# tried once, connected or not); `systemctl status` shows its STATUS= line (each adapter's state, turns).
Type=notify
NotifyAccess=main
# Herald pings WATCHDOG=1 from its event loop every {ping} s. A loop blocked for {watchdog} s (a wedged call,
# a busy loop) misses them: systemd aborts the process and Restart= starts it again.
WatchdogSec={watchdog}
TimeoutStartSec={start_timeout}"""

_STOP = """\
Restart=on-failure
RestartSec=5
# SIGTERM starts a graceful drain (gateway.drain_seconds, 30 s by default); Herald says STOPPING=1 then.
# The stop timeout leaves room for the drain plus closing platform connections before SIGKILL. Raise both
# together.
KillSignal=SIGTERM
TimeoutStopSec=45
# SIGTERM to Herald only, so commands the terminal tool started are not killed under a turn that is
# still draining; whatever is left when Herald exits is then killed.
KillMode=mixed"""

_SYSTEM = """\
# Herald messaging gateway — systemd unit (written by `herald service install`). Installation: deploy/README.md.
#
# State ({state}) lives in /var/lib/herald, created by
# StateDirectory= and owned by the `herald` user. Secrets go in /etc/herald/herald.env or
# /var/lib/herald/.env, never in config.yaml.

[Unit]
Description={title}
Documentation=file:///opt/herald/deploy/README.md
Wants=network-online.target
After=network-online.target
# With PostgreSQL on this host, add: After=postgresql.service
# Give up after 5 crashes in 5 minutes instead of restarting forever on a broken config.
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
""" + _NOTIFY + """
User={run_as}
Group={run_as}
ExecStart={exec_start} run
{env}
Environment=PYTHONUNBUFFERED=1
# "-": the unit still starts when the file does not exist (a local model needs no key).
EnvironmentFile=-/etc/herald/herald.env
StateDirectory=herald
StateDirectoryMode=0700
WorkingDirectory=/var/lib/herald
# The log and the database hold chat text: nothing Herald creates should be readable by others.
UMask=0077

""" + _STOP + """

# --- Hardening -------------------------------------------------------------------------------------
NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
# The whole filesystem is read-only except the StateDirectory above (writable automatically) and a
# private /tmp. The agent's commands run in their own bubblewrap sandbox inside that (README, "The
# sandbox"): they may write only to the workspace, /var/lib/herald/workspace by default.
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
PrivateDevices=yes
# ProtectKernelTunables= and ProtectKernelLogs= stay off: they mount over parts of /proc (/proc/sys,
# /proc/kmsg, ...), and the kernel then refuses the fresh /proc bubblewrap mounts for the agent's
# commands in their own PID namespace ("Can't mount proc on /newroot/proc: Operation not permitted"),
# which turns the terminal tool off. Herald runs without capabilities, so /proc/sys is not writable
# for it anyway. With the terminal disabled (or tools.terminal.sandbox: none) you may turn them on.
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
# AF_UNIX also carries the notify messages to systemd, and the sandbox's network proxy. AF_NETLINK:
# bubblewrap configures the loopback device of each sandbox's own network namespace over rtnetlink.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
# The namespaces bubblewrap creates for the agent's commands (an unprivileged user namespace holding
# new mount, PID, IPC, UTS and network namespaces; the network is reached through Herald's proxy). Not cgroup.
# NoNewPrivileges= above is fine: Herald's bwrap is not setuid and needs no privileges.
RestrictNamespaces=user mnt pid ipc uts net
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
SystemCallArchitectures=native
# MemoryDenyWriteExecute= stays off: libffi closures (ctypes/cffi callbacks, used under the hood by
# some crypto and SDK dependencies) need writable+executable pages and would crash at runtime.
# SystemCallFilter= stays off too: the terminal tool runs arbitrary commands whose syscalls we
# cannot list. With the terminal tool disabled you may add: SystemCallFilter=@system-service

[Install]
WantedBy=multi-user.target
"""

_USER = """\
# Herald messaging gateway — systemd user unit (written by `herald service install --user`).
# Runs as you, with your HERALD_HOME. To keep it running while you are logged out:
#   loginctl enable-linger $USER

[Unit]
Description={title}
Wants=network-online.target
After=network-online.target
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
""" + _NOTIFY + """
ExecStart={exec_start} run
{env}
Environment=PYTHONUNBUFFERED=1
UMask=0077

""" + _STOP + """

# A user manager cannot apply ProtectSystem=, PrivateTmp= and the like without moving the service into a
# user namespace of its own; the agent's commands are confined by bubblewrap either way (README, "The
# sandbox"). What needs no privilege:
NoNewPrivileges=yes

[Install]
WantedBy=default.target
"""

"""``herald doctor``: can this installation work? Start-up's checks (gateway/ops/preflight.py) plus live ones.

Each check is one ``Check``: ok, warn (works, but say it) or fail, a message, and what to do. The live ones
talk to the world with a time limit each and run side by side: the model endpoint (its model list, or a
one-token request where there is none; the key must be accepted), each enabled platform's credential (the
platform module's ``check_credentials`` hook: the core names no platform) and its credential lock, the
database and its schema, the tool sandbox (``true`` run inside it), the home's permissions, free disk, and the
clock (against the Date header of the answers above and, where there is one, the NTP state).

Nothing here prints a secret: every message goes through the log redactor with the configured secrets
registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from gateway.config import Config, ConfigError, Paths, configured_secrets
from gateway.kernel.configbase import secret
from gateway.ops import preflight

Status = Literal["ok", "warn", "fail"]

DISK_FAIL_BYTES = 200 * 1024**2
DISK_WARN_BYTES = 1024**3
CLOCK_SKEW_SECONDS = 60.0


@dataclass
class Check:
    name: str
    status: Status
    message: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Doctor:
    cfg: Config
    paths: Paths
    timeout: float = 10.0
    # The config's validation problems, and the sections that have them (replaced by their defaults, so the
    # checks that read them are left out): gateway/ops/preflight.py's salvage.
    schema: list[str] = field(default_factory=list)
    skip: frozenset[str] = frozenset()
    # (what answered, its Date header as epoch seconds, our clock when it answered): the clock check's witnesses
    dates: list[tuple[str, float, float]] = field(default_factory=list)

    async def run(self) -> list[Check]:
        from gateway.kernel.logs import add_secret

        for value in configured_secrets(self.cfg):  # masked in every message below
            add_secret(value)
        checks = self.config() + self.home()
        database = await self.database()
        live = await asyncio.gather(self.model(), self.platforms(), self.sandbox(), self.mcp())
        checks += database + [c for group in live for c in group]
        checks.append(self.clock())
        return [_redacted(c) for c in checks]

    # ---- start-up's checks ---------------------------------------------------------------------------

    def config(self) -> list[Check]:
        from gateway.turns import sandboxing

        out = [Check("config", "fail", line, "fix it; the checks of that section run once it validates")
               for line in self.schema]
        out += [Check(p.key, "fail", p.message) for p in preflight.config_problems(self.cfg, self.paths)]
        if "tools" not in self.skip:
            try:
                sandboxing.workspace(self.cfg, self.paths)
            except ConfigError as exc:
                out.append(Check("tools.terminal.cwd", "fail", str(exc).removeprefix("tools.terminal.cwd: ")))
        if not out:
            where = self.paths.config_file if self.paths.config_file.exists() else "embedded defaults"
            out.append(Check("config", "ok", f"{where}"))
        return out

    def home(self) -> list[Check]:
        problems = preflight.home_problems(self.paths, create=False)
        if not problems and "logging" not in self.skip:
            problems = preflight.logs_problems(self.cfg, self.paths)
        if problems:
            return [Check(p.key, "fail", p.message) for p in problems]
        return [self._permissions(), self._disk(), self._media()]

    def _media(self) -> Check:
        """How much the media folders hold: what people sent (the workspace's attachments when sandboxed) and
        the daemon's own copies (what the agent sent, voice notes, the web chat's files)."""
        from gateway.turns import sandboxing

        folders = [self.paths.media_dir]
        try:
            folders.append(sandboxing.workspace(self.cfg, self.paths) / "attachments")
        except ConfigError:
            pass
        total, count = 0, 0
        for folder in dict.fromkeys(folders):
            for root, _dirs, files in os.walk(folder):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_size
                        count += 1
                    except OSError:
                        pass
        where = ", ".join(str(f) for f in dict.fromkeys(folders))
        text = f"{total / 1024**2:.1f} MB in {count} file{'s' if count != 1 else ''} ({where})"
        if total > DISK_WARN_BYTES and not self.cfg.sessions.retention_days:
            return Check("media", "warn", text, "set sessions.retention_days: retention deletes the media of "
                                                "the sessions it deletes")
        return Check("media", "ok", text)

    def _permissions(self) -> Check:
        from gateway.platforms import home_files

        home = self.paths.home
        if not home.exists():
            return Check("home", "ok", f"{home} will be created 0700 at the first start")
        uid = os.getuid()
        loose, foreign = [], []
        names = ("state.db", *(name for _, name in home_files()), ".env", "config.yaml", "logs")
        for path in [home, *(home / n for n in names)]:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if st.st_uid != uid:
                foreign.append(path.name or str(path))
            elif st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                loose.append(f"{path.name} {stat.S_IMODE(st.st_mode):o}")
        if foreign:
            return Check("home", "fail", f"{', '.join(foreign)} in {home} belong to another user",
                         f"chown -R {os.environ.get('USER') or uid} {home}")
        if loose:
            return Check("home", "warn", f"readable by others: {', '.join(loose)}",
                         f"chmod -R go-rwx {home} (herald run also tightens them at start)")
        return Check("home", "ok", f"{home} is private (0700, files 0600)")

    def _disk(self) -> Check:
        place = next((p for p in (self.paths.home, *self.paths.home.parents) if p.exists()), Path("/"))
        usage = shutil.disk_usage(place)
        free = f"{usage.free / 1024**3:.1f} GiB free of {usage.total / 1024**3:.1f} GiB on {place}"
        if usage.free < DISK_FAIL_BYTES:
            return Check("disk", "fail", free, "free some space: the database and logs need room to grow")
        if usage.free < DISK_WARN_BYTES:
            return Check("disk", "warn", free, "less than 1 GiB left: consider sessions.retention_days")
        return Check("disk", "ok", free)

    async def database(self) -> list[Check]:
        if "database" in self.skip:
            return []
        problems = await preflight.database_problems(self.cfg, self.paths)
        if problems:
            return [Check(p.key, "fail", p.message) for p in problems]
        url = preflight.database_url(self.cfg, self.paths)
        path = preflight.sqlite_path(url) if url.startswith("sqlite") else None
        if path is not None and not path.exists():
            return [Check("database", "ok", f"SQLite {path} is created at the first start")]
        try:
            missing = await _schema_gaps(url)
        except Exception as exc:
            problem = preflight.database_problem(self.cfg, self.paths, exc)
            return [Check(problem.key, "fail", problem.message)]
        where = preflight.masked(url) if path is None else f"SQLite {path}"
        if missing:
            return [Check("database", "warn", f"{where} answers; its schema lacks {', '.join(missing[:5])}"
                                              f"{' …' if len(missing) > 5 else ''}",
                          "herald run adds them at start (an upgrade from an older Herald)")]
        return [Check("database", "ok", f"{where} answers; schema current")]

    # ---- MCP servers ---------------------------------------------------------------------------------

    async def mcp(self) -> list[Check]:
        """Each enabled MCP server started as the daemon starts it (in its sandbox), its tools listed, stopped.
        One that does not answer is a warning: Herald runs without it and keeps retrying."""
        servers = self.cfg.mcp.enabled() if "mcp" not in self.skip else {}
        if not servers:
            return []
        from gateway.turns import sandboxing
        from tools.mcp.client import probe
        from tools.mcp.hub import describe

        try:
            policy = sandboxing.policy(self.cfg, self.paths, create=False)
        except ConfigError:
            policy = None

        async def one(name: str, server: Any) -> Check:
            key = f"mcp.servers.{name}"
            if server.command is not None and policy is not None and not policy.workspace.is_dir():
                return Check(key, "ok", "not started here: the workspace is created at the first start")
            started = time.monotonic()
            try:
                offer = await probe(name, server, policy, min(self.timeout, server.startup_timeout_seconds))
            except Exception as exc:
                return Check(key, "warn", f"down: {describe(exc)}",
                             "Herald runs without it and retries with backoff; its stderr is in the log (mcp_stderr)")
            return Check(key, "ok", f"answers: {len(offer.tools)} tool(s) ({_took(started)})")

        return list(await asyncio.gather(*(one(n, s) for n, s in servers.items())))

    # ---- the model -----------------------------------------------------------------------------------

    async def model(self) -> list[Check]:
        m = self.cfg.model
        if "model" in self.skip:
            return []
        if not m.configured:
            return [Check("model", "fail", "no model configured: the chat can only say how to configure one",
                          f"set model.base_url, model.name and model.api_key_env in {self.paths.config_file}")]
        endpoints = [("model", m.base_url, m.name, m.api_key_env)]
        endpoints += [(f"model.fallbacks.{i}", f.base_url, f.name, f.api_key_env) for i, f in enumerate(m.fallbacks)]
        return list(await asyncio.gather(*(self._endpoint(*e) for e in endpoints)))

    async def _endpoint(self, key: str, base_url: str | None, name: str | None, key_env: str | None) -> Check:
        import aiohttp

        assert base_url and name
        api_key = secret(key_env) if key_env else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        base = base_url.rstrip("/")
        started = time.monotonic()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as http:
                status, body = await self._models(http, base, headers)
                if status in (404, 405):  # no model list here: one token of the model itself
                    status, body = await _one_token(http, base, name, headers)
                    if status == 200:
                        return Check(key, "ok", f"{base} answers a one-token request of {name}"
                                                f"{', key accepted' if api_key else ''} ({_took(started)})")
                elif status == 200 and api_key:
                    # Some providers' model lists are public (OpenRouter): the list answering proves the key
                    # only when a request without it is refused. Otherwise one token of the model proves it.
                    public, _ = await self._models(http, base, {})
                    if public == 200:
                        missing = _not_offered(key, base, name, body)
                        if missing is not None:
                            return missing
                        status, body = await _one_token(http, base, name, headers)
                        if status == 200:
                            return Check(key, "ok", f"{base} answers, key accepted by a one-token request of {name} "
                                                    f"(its model list is public) ({_took(started)})")
        except TimeoutError:
            return Check(key, "fail", f"no answer from {base} within {self.timeout:g} s",
                         "is the server up and reachable from here? (--timeout raises the limit)")
        except aiohttp.ClientError as exc:
            return Check(key, "fail", f"cannot reach {base}: {exc}", "check model.base_url and the network")
        said = _error_text(body)
        if status in (401, 403):
            which = f"the key in {key_env}" if key_env else "a request without a key"
            return Check(key, "fail", f"{base} refused {which} (HTTP {status}{f': {said}' if said else ''})",
                         f"put a valid key in {key_env}" if key_env else f"set {key}.api_key_env")
        if status != 200:
            return Check(key, "fail", f"{base} answered HTTP {status}{f': {said}' if said else ''}",
                         "check model.base_url and model.name")
        missing = _not_offered(key, base, name, body)
        if missing is not None:
            return missing
        accepted = "key accepted" if api_key else "no key needed"
        return Check(key, "ok", f"{base} answers, {accepted}, {name} offered ({_took(started)})")

    async def _models(self, http: Any, base: str, headers: dict[str, str]) -> tuple[int, Any]:
        async with http.get(f"{base}/models", headers=headers) as resp:
            self._date(base, resp.headers)
            return resp.status, await _json(resp)

    def _date(self, who: str, headers: Any) -> None:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            when = email.utils.parsedate_to_datetime(headers.get("Date", ""))
            self.dates.append((who, when.timestamp(), time.time()))

    # ---- platforms -----------------------------------------------------------------------------------

    async def platforms(self) -> list[Check]:
        from gateway.platforms import PLATFORMS

        enabled = [(n, getattr(self.cfg.platforms, n)) for n in PLATFORMS
                   if getattr(self.cfg.platforms, n, None) is not None and getattr(self.cfg.platforms, n).enabled]
        results = await asyncio.gather(*(self._platform(n, section) for n, section in enabled))
        return [c for group in results for c in group]

    async def _platform(self, name: str, section: Any) -> list[Check]:
        from gateway.platforms import adapter_class
        from gateway.platforms.base import CredentialRejected

        key = f"platforms.{name}"
        if section.problems():
            return []  # named by the config check already (a secret that is not set)
        cls = adapter_class(name)
        try:
            who = await cls.check_credentials(section, self.timeout)
        except CredentialRejected as exc:
            return [Check(key, "fail", str(exc), f"put the right token in the variable {key}'s *_env names")]
        except TimeoutError:
            return [Check(key, "fail", f"{name} did not answer within {self.timeout:g} s", "check the network")]
        except Exception as exc:
            return [Check(key, "fail", f"could not ask {name}: {type(exc).__name__}: {exc}", "check the network")]
        credentials = cls.credentials_of(section)
        if who is None and not credentials:
            return []  # nothing to check (the web chat's token is its own)
        checks = [Check(key, "ok", f"credential accepted ({who})" if who else "credentials set")]
        lock = await self._lock(name, credentials)
        if lock is not None:
            checks.append(lock)
        return checks

    async def _lock(self, name: str, credentials: list[tuple[str, str]]) -> Check | None:
        """Another process holding this credential's lock (not this profile's own running daemon) is a fail."""
        from gateway.cluster.locks import CredentialLocked, CredentialLocks, describe_holder

        if not credentials:
            return None
        locks = CredentialLocks(preflight.database_url(self.cfg, self.paths), self.paths.profile)
        try:
            await locks.acquire(f"doctor:{name}", credentials)
        except CredentialLocked as exc:
            ours = await self._our_daemons()
            if (exc.holder.get("host"), exc.holder_pid) in ours:
                return Check(f"platforms.{name}.lock", "ok", f"held by this profile's running daemon "
                                                             f"({describe_holder(exc.holder)})")
            return Check(f"platforms.{name}.lock", "fail",
                         f"locked by another process ({describe_holder(exc.holder)})",
                         "stop that Herald, or give this profile its own bot token")
        except Exception as exc:
            return Check(f"platforms.{name}.lock", "warn", f"could not check the lock: {exc}")
        finally:
            await locks.release(f"doctor:{name}")
        return Check(f"platforms.{name}.lock", "ok", "not in use by another process")

    async def _our_daemons(self) -> set[tuple[str, int]]:
        """(host, pid) of daemons with a live heartbeat in this profile's database."""
        from sqlalchemy import select

        from gateway.storage.db import make_engine
        from gateway.storage.tables import instances

        engine = make_engine(preflight.database_url(self.cfg, self.paths))
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(select(instances.c.host, instances.c.pid)
                                           .where(instances.c.heartbeat_at > time.time() - 60))).all()
            return {(r.host, r.pid) for r in rows}
        except Exception:
            return set()
        finally:
            await engine.dispose()

    # ---- the sandbox ---------------------------------------------------------------------------------

    async def sandbox(self) -> list[Check]:
        from gateway.turns import sandboxing
        from tools.sandbox import resolve_mode, run_sandboxed, startup_problem

        terminal = self.cfg.tools.terminal
        if "tools" in self.skip:
            return []
        if not terminal.enabled:
            return [Check("sandbox", "ok", "the terminal tool is off (tools.terminal.enabled): nothing to run")]
        mode, problem = await asyncio.to_thread(resolve_mode, terminal.sandbox, terminal.network)
        if mode == "none":
            return [Check("sandbox", "warn", "tools.terminal.sandbox is none: commands run unsandboxed",
                          "install bubblewrap and set tools.terminal.sandbox: auto")]
        if mode == "off":
            return [Check("sandbox", "fail", startup_problem(mode, problem) or "no sandbox",
                          "install bubblewrap (apt install bubblewrap); under systemd or Docker see deploy/README.md")]
        try:
            policy = sandboxing.policy(self.cfg, self.paths, create=False)
        except ConfigError:
            return []  # the config check names it
        with tempfile.TemporaryDirectory(prefix="herald-doctor-") as scratch:
            if not await asyncio.to_thread(os.path.isdir, policy.workspace):  # not made yet: an empty stand-in
                from dataclasses import replace

                policy = replace(policy, workspace=Path(scratch))
            try:
                code, _, err = await run_sandboxed("true", policy, timeout=self.timeout)
            except TimeoutError:
                return [Check("sandbox", "fail", f"`true` did not finish within {self.timeout:g} s in bubblewrap")]
            except Exception as exc:
                return [Check("sandbox", "fail", f"bubblewrap could not run `true`: {exc}")]
        if code != 0:
            return [Check("sandbox", "fail", f"`true` in bubblewrap exited {code}: {err.strip()[-200:]}",
                          "see the README's \"The sandbox\" (user namespaces must be allowed)")]
        net = "" if terminal.network else ", no network"
        return [Check("sandbox", "ok", f"bubblewrap runs commands (`true` exited 0{net})")]

    # ---- the clock -----------------------------------------------------------------------------------

    def clock(self) -> Check:
        ntp = _ntp_synchronized()
        if self.dates:
            who, theirs, ours = self.dates[0]
            skew = ours - theirs
            if abs(skew) > CLOCK_SKEW_SECONDS:
                return Check("clock", "fail", f"this machine's clock is {abs(skew):.0f} s "
                                              f"{'ahead of' if skew > 0 else 'behind'} {who}",
                             "enable time synchronisation (timedatectl set-ntp true): cron runs at the wrong times")
            if ntp is False:
                return Check("clock", "warn", f"within {abs(skew):.0f} s of {who}, but not NTP-synchronised",
                             "timedatectl set-ntp true")
            return Check("clock", "ok", f"within {max(1, round(abs(skew)))} s of {who}"
                                        + (", NTP-synchronised" if ntp else ""))
        if ntp is True:
            return Check("clock", "ok", "NTP-synchronised (timedatectl)")
        if ntp is False:
            return Check("clock", "warn", "not NTP-synchronised (timedatectl)", "timedatectl set-ntp true")
        return Check("clock", "warn", "nothing to compare the clock with (no answer carried a Date header)")


async def _one_token(http: Any, base: str, name: str, headers: dict[str, str]) -> tuple[int, Any]:
    payload = {"model": name, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    async with http.post(f"{base}/chat/completions", json=payload, headers=headers) as resp:
        return resp.status, await _json(resp)


def _not_offered(key: str, base: str, name: str, body: Any) -> Check | None:
    """A model list that does not name the configured model (an empty or odd list says nothing)."""
    offered = [str(m.get("id")) for m in (body.get("data") or []) if isinstance(m, dict)] \
        if isinstance(body, dict) else []
    if offered and name not in offered and f"{name}:latest" not in offered:
        shown = ", ".join(offered[:8]) + (" …" if len(offered) > 8 else "")
        return Check(key, "fail", f"{base} answers, but does not offer {name} (it offers: {shown})",
                     f"check {key}.name")
    return None


def _took(started: float) -> str:
    return f"{time.monotonic() - started:.2f} s"


async def _schema_gaps(url: str) -> list[str]:
    """Tables and columns Herald declares that the database does not have (read only: nothing is created)."""
    from sqlalchemy import inspect

    from gateway.storage.db import make_engine
    from gateway.storage.tables import metadata

    def gaps(conn: Any) -> list[str]:
        inspector = inspect(conn)
        present = set(inspector.get_table_names())
        out = []
        for table in metadata.sorted_tables:
            if table.name not in present:
                out.append(table.name)
                continue
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            out += [f"{table.name}.{c.name}" for c in table.columns if c.name not in columns]
        return out

    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(gaps)
    finally:
        await engine.dispose()


async def _json(resp: Any) -> Any:
    try:
        return await resp.json(content_type=None)
    except Exception:
        return None


def _error_text(body: Any) -> str | None:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("code") or "")[:200] or None
        if isinstance(err, str):
            return err[:200]
    return None


def _ntp_synchronized() -> bool | None:
    exe = shutil.which("timedatectl")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "show", "-p", "NTPSynchronized", "--value"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.strip()
    return {"yes": True, "no": False}.get(value) if out.returncode == 0 else None


def _redacted(check: Check) -> Check:
    from gateway.kernel.logs import redact

    return Check(check.name, check.status, redact(check.message), redact(check.fix) if check.fix else None)

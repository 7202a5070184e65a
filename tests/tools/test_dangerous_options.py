"""The option allowlist: for each program the classifier lets run unprompted, its harmless forms run, and
each option its manual documents as deleting, moving away, writing outside the workspace or running a
program asks (or is hardline where it is catastrophic); an option missing from its table asks; and every
such program has a table, so a new one cannot be added without one."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tools.dangerous import classify
from tools.shell.check import Checker
from tools.shell.files import _COMPRESSORS
from tools.shell.known import READ_ONLY
from tools.shell.optcheck import spec_for
from tools.shell.projects import RUNNERS
from tools.shell.reading import LANGS, SHELLS
from tools.shell.runners import _DB_CLIENTS, WRAPPERS
from tools.shell.tables import OPTIONS


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    for name in ("notes.txt", "data.txt", "a.tar", "a.zip", "data.gz", "f"):
        (root / name).write_text("a\nb\n")
    return root


H = "hardline"

# program -> (forms that run unprompted, forms that ask). A form that must be hardline is ``(form, H)``.
TABLE: dict[str, tuple[list[str], list[str | tuple[str, str]]]] = {
    "tar": (["tar -czf out.tar.gz src", "tar -xzf a.tar", "tar -tvf a.tar", "tar xf a.tar -C src",
             "tar --exclude=.git -cf out.tar src", "tar -xf a.tar --strip-components=1 --keep-old-files"],
            ["tar --remove-files -cf out.tar src", "tar -cf out.tar --remove src", "tar -x --recursive-unlink -f a.tar",
             "tar -xUf a.tar", "tar -x --unlink-first -f a.tar", "tar --to-command='rm -x' -xf a.tar",
             ("tar -I 'rm -rf /' -xf a.tar", H), "tar -xPf a.tar", "tar -xf a.tar --one-top-level=/etc",
             "tar -g /etc/snap -cf out.tar src", "tar --volno-file=/etc/x -cf out.tar src",
             "tar --suffix=/../x --backup -xf a.tar", "tar -cf /etc/out.tar src", "tar --frobnicate -xf a.tar"]),
    "bsdtar": (["bsdtar -cf out.tar src", "bsdtar -xf a.tar"],
               ["bsdtar -xUf a.tar", "bsdtar -xPf a.tar", "bsdtar --unlink -xf a.tar"]),
    "zip": (["zip -r out.zip src", "zip -q out.zip notes.txt", "zip -9 -x '*.git*' -r out.zip src"],
            ["zip -m out.zip notes.txt", "zip -rm out.zip src", "zip --move out.zip notes.txt",
             ("zip -T -TT 'rm -rf /' out.zip notes.txt", H), "zip -lf /etc/log out.zip notes.txt",
             "zip /etc/out.zip notes.txt", "zip --frob out.zip notes.txt",
             "zip --logfile-path=/etc/log out.zip notes.txt"]),
    "unzip": (["unzip a.zip", "unzip -l a.zip", "unzip -o a.zip -d src", "unzip -p a.zip notes.txt"],
              ["unzip -: a.zip", "unzip a.zip -d /etc", "unzip -o a.zip -d /tmp/x", "unzip -Y a.zip"]),
    "gzip": (["gzip -k notes.txt", "gzip notes.txt", "gzip -c notes.txt", "gzip -t data.gz"],
             ["gzip -r src", "gzip *.txt", "gzip a b c d", "gzip -S /../x notes.txt", "gzip /etc/passwd",
              "gzip --frob notes.txt"]),
    "gunzip": (["gunzip data.gz", "gunzip -c data.gz", "gunzip -k data.gz"], ["gunzip -r src", "gunzip *.gz"]),
    "bzip2": (["bzip2 -k notes.txt", "bzip2 -dc data.bz2"], ["bzip2 *.txt", "bzip2 --frob x"]),
    "xz": (["xz -k notes.txt", "xz -d -c data.xz", "xz -T0 notes.txt"], ["xz *.txt", "xz -S /x notes.txt"]),
    "zstd": (["zstd notes.txt", "zstd -d data.zst -o out.txt", "zstd -19 notes.txt"],
             ["zstd --rm notes.txt a b c", "zstd --rm *.txt", "zstd -o /etc/x notes.txt",
              "zstd --output-dir-flat=/etc notes.txt", "zstd --trace=/etc/x notes.txt"]),
    "lz4": (["lz4 notes.txt", "lz4 -d data.lz4"], ["lz4 --rm *.txt"]),
    "rsync": (["rsync -av src/ out/", "rsync -a --exclude=.git src/ out/", "rsync -n -av src/ out/"],
              ["rsync -a --delete src/ out/", "rsync -a --del src/ out/", "rsync -a --delete-after src/ out/",
               "rsync -a --delete-excluded src/ out/", "rsync -a --remove-source-files src/ out/",
               "rsync -a --force src/ out/", "rsync -a --max-delete=5 src/ out/", "rsync -M--delete src/ out/",
               ("rsync -e 'rm -rf /' src/ host:out/", H), "rsync -a src/ /etc/", "rsync --log-file=/etc/x src/ out/",
               "rsync -a --backup-dir=/etc src/ out/", "rsync -T /etc src/ out/", "rsync --daemon",
               "rsync --suffix=/../x -b src/ out/", "rsync -a src/ host:out/"]),
    "cp": (["cp notes.txt copy.txt", "cp -r src out", "cp -a src/ out/", "cp -n notes.txt src/",
            "cp --remove-destination notes.txt copy.txt", "cp -b notes.txt copy.txt"],
           ["cp notes.txt /etc/x", "cp -t /etc notes.txt", "cp -b -S /../../x notes.txt copy.txt",
            "cp --suffix=/x -b notes.txt copy.txt", "cp --frob notes.txt copy.txt", "cp -T src /etc/x"]),
    "mv": (["mv notes.txt old.txt", "mv -n notes.txt src/", "mv -b notes.txt old.txt"],
           ["mv notes.txt /etc/x", "mv -t /tmp notes.txt", "mv -S /x -b notes.txt old.txt", ("mv /etc /x", H),
            "mv --frob a b", "mv a b c d /dev/null"]),
    "install": (["install -m 644 notes.txt src/notes.txt", "install -d build"],
                ["install --strip-program='rm -x' -s notes.txt src/x", "install notes.txt /usr/local/bin/x",
                 "install -S /x -b notes.txt src/notes.txt"]),
    "ln": (["ln -s notes.txt link.txt", "ln -sf notes.txt link.txt"],
           ["ln -s /etc/passwd /etc/x", "ln -f notes.txt /etc/x", "ln -S /x -b notes.txt n2"]),
    "rm": (["rm -f notes.txt", "rm notes.txt data.txt", "rm -i notes.txt"],
           ["rm -r src", "rm -d src", "rm -f *.txt", "rm a b c d", ("rm -rf --no-preserve-root /", H),
            "rm --frob notes.txt", "rm /etc/x"]),
    "unlink": (["unlink notes.txt"], ["unlink /etc/x", "unlink notes.txt; unlink a; unlink b; unlink c"]),
    "rmdir": (["rmdir src", "rmdir -p src"], ["rmdir /etc/x"]),
    "sed": (["sed -i s/a/b/ notes.txt", "sed -i.bak s/a/b/ notes.txt", "sed -n 1p notes.txt",
             "sed -E -e s/a/b/ notes.txt"],
            ["sed -i s/a/b/ /etc/x", "sed -i'/etc/*' s/a/b/ notes.txt", "sed --in-place=/tmp/x s/a/b/ notes.txt",
             "sed 'w /etc/x' notes.txt", "sed 'e rm -x' notes.txt", "sed --frob 1p notes.txt"]),
    "find": (["find . -name '*.py'", "find src -type f -newer notes.txt -print0", "find . -maxdepth 2 -empty",
              "find . -name x -exec grep -l y {} +"],
             ["find . -delete", "find . -name x -exec rm {} +", ("find / -exec rm -rf {} +", H),
              "find . -execdir rm {} ;", "find . -ok rm {} ;", "find . -fprint /etc/x", "find . -fls /etc/x",
              "find . -fprintf /etc/x %p", "find . -frob", "find . $EXPR"]),
    "dd": (["dd if=notes.txt of=out.bin bs=1 count=1 status=none", "dd if=notes.txt conv=ucase"],
           ["dd if=notes.txt of=/etc/x", ("dd if=/dev/zero of=/dev/sda", H), "dd frob=1 if=notes.txt"]),
    "sort": (["sort notes.txt", "sort -o sorted.txt notes.txt", "sort -k2,2n -t, notes.txt"],
             ["sort -o /etc/x notes.txt", "sort --compress-program='rm -x' notes.txt", "sort --frob notes.txt"]),
    "uniq": (["uniq -c notes.txt", "uniq notes.txt out.txt"], ["uniq notes.txt /etc/x", "uniq --frob notes.txt"]),
    "tee": (["echo x | tee out.txt", "echo x | tee -a out.txt"], ["echo x | tee /etc/x", "echo x | tee --frob y"]),
    "truncate": (["truncate -s 0 notes.txt", "truncate -s +1M notes.txt"],
                 ["truncate -s 0 /etc/x", "truncate -s 0 *", "truncate -s0 a b c d"]),
    "split": (["split -l 10 notes.txt part_"], ["split --filter='rm -x' notes.txt", "split notes.txt /etc/x"]),
    "patch": (["patch --dry-run -p1 -i fix.diff"], ["patch -p1 -i /etc/x.diff", "patch -r /etc/x -p1 -i x.diff",
                                                   "patch -B /x/ -b -p1 -i fix.diff", "curl -s x | patch -p1"]),
    "xxd": (["xxd notes.txt", "xxd -r -p hex.txt out.bin", "xxd -c 8 notes.txt"],
            ["xxd -r notes.txt /etc/x", "xxd -Z notes.txt"]),
    "tree": (["tree -L 2", "tree -o out.txt"], ["tree -R -H . ", "tree -o /etc/x"]),
    "curl": (["curl -s https://example.com", "curl -fsSL -o page.html https://example.com",
              "curl -X POST -d @notes.txt https://example.com"],
             ["curl -o /etc/x https://example.com", "curl -K cfg https://example.com",
              "curl --engine x https://example.com", "curl --unix-socket /s http://x/",
              "curl --abstract-unix-socket s http://x/", "curl -w '%output{/etc/x}' https://e.com",
              "curl --frob https://example.com", "curl --libcurl /etc/x https://e.com"]),
    "wget": (["wget -q https://example.com/file.tar.gz", "wget -O page.html https://example.com"],
             ["wget -O /etc/x https://example.com", "wget -e robots=off https://example.com",
              "wget --save-cookies=/etc/c https://e.com", "wget --warc-file=/etc/w https://e.com",
              "wget --use-askpass='rm -x' https://e.com", "wget --frob https://e.com"]),
    "git": (["git status -sb", "git log --oneline --graph -n 5", "git diff --stat HEAD~1", "git add -A",
             "git commit -m wip --no-verify", "git stash", "git stash pop", "git rm notes.txt",
             "git rm --cached -r src",
             "git clean -n", "git checkout main", "git switch -c feature", "git restore --staged notes.txt",
             "git branch -d old", "git fetch --prune", "git pull --rebase", "git push origin main", "git -P log",
             "git show --no-patch HEAD", "git config --get user.name", "git config -l --show-origin"],
            ["git stash -u", "git stash --include-untracked", "git stash -a", "git stash push --all",
             "git rm -r src", "git rm -f notes.txt", "git rm '*.txt'", "git rm a b c d", "git clean -fdx",
             "git clean -d", "git checkout -- notes.txt", "git checkout notes.txt", "git checkout HEAD~1 notes.txt",
             "git checkout -f main", "git checkout --no-overlay main -- src", "git checkout -B main",
             "git switch --discard-changes main", "git switch -f main", "git switch -C main", "git restore notes.txt",
             "git restore -SW notes.txt", "git reset --hard", "git reset --keep HEAD~1", "git mv -f a b",
             "git sparse-checkout set src", "git worktree remove x", "git submodule deinit -f x",
             "git reflog expire --expire=now --all", "git reflog delete HEAD@{1}", "git gc --prune=now", "git prune",
             "git read-tree -u HEAD", "git checkout-index -a -f", "git apply --unsafe-paths x.diff",
             "git maintenance start", "git log --output=/etc/x", "git diff --frob", "git --frob status",
             "git push --force", "git branch -D x", "git config --edit", "git config -f /etc/x a.b c"]),
    "ls": (["ls -la", "ls --color=auto -lhS --sort=time src"], ["ls --frob", "ls -j"]),
    "cat": (["cat -n notes.txt"], ["cat --frob notes.txt"]),
    "grep": (["grep -rn --include='*.py' x .", "grep -5 x notes.txt", "grep -E -e a -e b notes.txt"],
             ["grep --frob x notes.txt"]),
    "file": (["file -b notes.txt"], ["file -C -m magic", "file --compile"]),
    "ss": (["ss -tlnp"], ["ss -K dst 1.2.3.4", "ss -D /etc/x"]),
    "lastlog": (["lastlog -u root"], ["lastlog -C -u root", "lastlog --set -u root"]),
    "head": (["head -5 notes.txt", "head -n 3 notes.txt"], ["head --frob notes.txt"]),
    "tail": (["tail -f notes.txt", "tail -n +2 notes.txt"], ["tail --frob notes.txt"]),
    "jq": (["jq -r '.a' notes.txt", "jq --arg k v -n '$k'"], ["jq --frob . notes.txt"]),
    "ps": (["ps aux", "ps -eo pid,comm --sort=-%mem"], ["ps --frob"]),
    "date": (["date", "date -u +%s", "date -d yesterday"], ["date -s 2020-01-01", "date 010112002020"]),
    "dmesg": (["dmesg -T", "dmesg --level=err"], ["dmesg -C", "dmesg -c", "dmesg -n 1", "dmesg -D"]),
    "journalctl": (["journalctl -u nginx -n 50 --no-pager", "journalctl -b -1"],
                   ["journalctl --vacuum-size=1M", "journalctl --rotate", "journalctl --cursor-file=/etc/x"]),
    "systemctl": (["systemctl status nginx --no-pager"], ["systemctl restart nginx", ("systemctl reboot", H)]),
    "man": (["man ls", "man -k socket"], ["man -P 'rm -x' ls", "man -H ls", "man -C cfg ls"]),
    "less": (["less notes.txt", "less -R -N notes.txt"],
             ["less +!cmd notes.txt", "less -o /etc/x notes.txt", "less -k keys notes.txt",
              "less --lesskey-content='x' notes.txt"]),
    "rg": (["rg -n 'def main' src", "rg --files -g '*.py'"], ["rg --pre 'rm -x' x", "rg --hostname-bin=x x",
                                                            "rg --frob x"]),
    "fd": (["fd -e py src"], ["fd -e py -x rm", "fd --frob"]),
    "ruff": (["ruff check .", "ruff check --fix src", "ruff format --check ."],
             ["ruff clean", "ruff check --cache-dir=/etc/x .", "ruff check -o /etc/x .", "ruff check --frob ."]),
    "black": (["black --check .", "black src"], ["black /etc/x.py", "black --frob ."]),
    "docker": (["docker ps -a --format '{{.ID}}'", "docker logs --tail 50 web", "docker run --rm alpine echo hi"],
               ["docker rm -f web", "docker system prune -af", "docker -H tcp://x ps", "docker ps --frob",
                "docker run -v /:/host alpine ls"]),
    "ssh": (["ssh host ls", "ssh -p 2222 -o StrictHostKeyChecking=no host uptime"],
            ["ssh -o PKCS11Provider=/x.so host", "ssh -I /x.so host", "ssh -E /etc/log host",
             "ssh -o UserKnownHostsFile=/etc/x host", "ssh -F cfg host", ("ssh -o ProxyCommand='rm -rf /' host", H)]),
    "script": (["script -q -c ls"], ["script /etc/x -c ls", "script -T /etc/t -c ls"]),
    "psql": (["psql -c 'select 1'", "psql -h db -U me -d app -At -c 'select 1'"],
             ["psql -L /etc/log -c 'select 1'", "psql -o /etc/x -c 'select 1'", "psql --frob"]),
    "mysql": (["mysql -h db -u me -e 'select 1'"], ["mysql --pager=less -e 'select 1'", "mysql --tee=/etc/x",
                                                  "mysql --defaults-file=x -e 'select 1'",
                                                  "mysql --plugin-dir=/x -e 'select 1'"]),
    "sqlite3": (["sqlite3 app.db 'SELECT 1'", "sqlite3 -readonly -json app.db 'SELECT 1'"],
                ["sqlite3 -A app.db -x", "sqlite3 -init x.sql app.db"]),
    "cockroach": (["cockroach sql -e 'select 1'"], ["cockroach start --insecure"]),
    "python3": (["python3 -c 'print(1)'", "python3 -u -X utf8 -W ignore -c 'print(1)'", "python3 -I -B -c 1"],
                ["python3 -X pycache_prefix=/etc -c 1", "python3 -X presite=x -c 1", "python3 -W error::m.W -c 1",
                 "python3 --frob -c 1"]),
    "perl": (["perl -ne 'print' notes.txt", "perl -MJSON::PP -e 'print 1'", "perl -pi -e 's/a/b/' notes.txt"],
             ["perl '-Mstrict;print 1' -e 1", "perl -d -e 1", "perl -d:Trace -e 1", "perl -i'/etc/*' -pe 1 f",
              "perl -u -e 1"]),
    "ruby": (["ruby -e 'puts 1'"], ["ruby --crash-report=/etc/x -e 1", "ruby -i/x/ -pe 1 f"]),
    "node": (["node -e 'console.log(1)'", "node --no-warnings -e 1"],
             ["node --inspect -e 1", "node --env-file=.env -e 1", "node --require=./x.js -e 1",
              "node --import=./x.mjs -e 1", "node --redirect-warnings=/etc/x -e 1",
              "node --openssl-config=x -e 1", "node --frob -e 1"]),
    "php": (["php -r 'echo 1;'"], ["php -z /x.so -r 1", "php -S 0.0.0.0:80", "php --define=auto_prepend_file=x -r 1",
                                  "php --php-ini=x.ini -r 1", "php --run='system(\"x\");'"]),
    "awk": (["awk '{print $1}' notes.txt", "awk -F: -v x=1 '{print}' notes.txt"],
            ["awk -o/etc/x '{print}' f", "awk -W exec f", "awk --frob '{print}' f", "gawk -E prog.awk f",
             "gawk --exec=prog.awk f", "gawk --file=prog.awk f", ("gawk --source 'BEGIN{system(\"rm -rf /\")}'", H),
             "gawk --source='BEGIN{system(\"rm -rf /\")}'", "gawk --include=lib f", "gawk --load=ext.so f"]),
    "gawk": (["gawk '{print}' notes.txt"], ["gawk --dump-variables=/etc/x 1 f", "gawk --profile=/etc/x 1 f"]),
    "bash": (["bash -c 'echo hi'", "bash -n x.sh", "bash -eu -o pipefail -c 'echo hi'"],
             ["bash --debugger x.sh", "bash --frob -c ls"]),
    "fish": (["fish -c 'echo hi'"], ["fish -C 'rm -x' -c ls", "fish --profile=/etc/x -c ls"]),
    "env": (["env -i ls", "env FOO=1 ls", "env -u X ls"], [("env -S 'rm -rf /'", H), "env --frob ls"]),
    "xargs": (["echo a | xargs -n1 echo", "xargs -0 -I{} echo {} < notes.txt", "xargs -i echo {} < notes.txt"],
              ["xargs --frob echo < notes.txt", ("echo / | xargs rm -rf", H)]),
    "timeout": (["timeout 5 ls", "timeout -k 1 -s TERM 5 ls"], ["timeout --frob 5 ls"]),
    "nice": (["nice -n 10 ls", "nice -10 ls"], ["nice --frob ls"]),
    "time": (["time ls", "time -p ls"], ["time -o /etc/x ls"]),
    "strace": (["strace -f -e trace=open ls"], ["strace -o /etc/x ls", "strace -E LD_PRELOAD=x ls"]),
    "valgrind": (["valgrind -q --leak-check=full ls"], ["valgrind --log-file=/etc/x ls", "valgrind --frob ls"]),
    "parallel": (["parallel -j2 echo ::: a b"], ["parallel -S host echo ::: a", "parallel --joblog /etc/x echo ::: a",
                                                "parallel --results /etc/r echo ::: a"]),
    "fakeroot": (["fakeroot ls"], ["fakeroot -l /x.so ls", "fakeroot -s /etc/state ls"]),
    "busybox": (["busybox ls"], ["busybox --install /x", ("busybox rm -rf /", H)]),
    "compgen": (["compgen -c ls"], [("compgen -W '$(rm -rf /)' x", H), "compgen -F f x"]),
    "jobs": (["jobs -l"], [("jobs -x rm -rf /", H)]),
    "npm": (["npm ls --json", "npm --version", "npm config get registry", "npm audit --json"],
            ["npm config set a b", "npm config edit", "npm audit fix", "npm fund x", "npm docs",
             "npm ls --userconfig=x", "npm -v install"]),
    "pip": (["pip list --outdated", "pip cache dir", "pip show requests", "python3 -m pip list"],
            ["pip cache purge", "pip config set a.b c", "pip list --log /etc/x", "pip install x"]),
    "pytest": (["pytest --version"], ["pytest -v", "pytest -h", "pytest"]),
    "make": (["make --version"], ["make help", "make", "make -n"]),
    "go": (["go version", "go env GOPATH", "go list -json ./..."], ["go env -w GOFLAGS=-toolexec=x", "go build"]),
    "uv": (["uv --version", "uv python list"], ["uv python uninstall 3.12", "uv run x"]),
    "conda": (["conda env list"], ["conda env remove -n x"]),
}


def _levels(forms: list[str | tuple[str, str]]) -> list[tuple[str, str]]:
    return [f if isinstance(f, tuple) else (f, "dangerous") for f in forms]


HARMLESS = [(p, c) for p, (ok, _) in TABLE.items() for c in ok]
ASKS = [(p, c, level) for p, (_, bad) in TABLE.items() for c, level in _levels(bad)]


@pytest.mark.parametrize(("program", "command"), HARMLESS)
def test_harmless_forms_run(ws: Path, program: str, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "safe", (program, command, verdict)


@pytest.mark.parametrize(("program", "command", "level"), ASKS)
def test_destructive_options_ask(ws: Path, program: str, command: str, level: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == level, (program, command, verdict)
    assert verdict.reason


# ---- what may expand to an option ---------------------------------------------------------------------

def test_a_file_named_like_an_option_makes_a_glob_ask(ws: Path) -> None:
    assert classify("tar -cf out.tar *", workspace=str(ws)).level == "safe"
    assert classify("touch -- --remove-files; tar -cf out.tar *", workspace=str(ws)).level == "dangerous"
    (ws / "--checkpoint-action=exec=sh x.sh").write_text("")
    assert classify("tar -cf out.tar *", workspace=str(ws)).level == "dangerous"
    assert classify("wc -l *", workspace=str(ws)).level == "safe"  # wc has no option that writes or runs


def test_a_value_only_known_at_run_time_in_option_position_asks(ws: Path) -> None:
    assert classify('sort "$X"', workspace=str(ws)).level == "dangerous"
    assert classify("f=notes.txt; sort $f", workspace=str(ws)).level == "safe"
    assert classify("f=--output=/etc/x; sort $f", workspace=str(ws)).level == "dangerous"
    assert classify('git log --author="$(git config user.name)"', workspace=str(ws)).level == "safe"
    assert classify('cat "$1"', workspace=str(ws)).level == "safe"  # cat's options only change what it prints


def test_options_by_environment_ask() -> None:
    for cmd in ("SIMPLE_BACKUP_SUFFIX=/x cp -b a b", "PYTHONWARNINGS=error::m.W python3 -c 1",
                "RIPGREP_CONFIG_PATH=x rg y", "PARALLEL='-S host' parallel echo ::: a", "GOFLAGS=-toolexec=x go env"):
        assert classify(cmd).level == "dangerous", cmd


def test_runners_ask_when_the_project_names_code_they_run(ws: Path) -> None:
    assert classify("cargo --version", workspace=str(ws)).level == "safe"
    (ws / "rust-toolchain.toml").write_text('[toolchain]\npath = "./evil"\n')
    assert "rust-toolchain.toml" in classify("cargo --version", workspace=str(ws), cwd=str(ws / "src")).reason
    (ws / ".zshenv").write_text("rm -rf ~\n")
    assert ".zshenv" in classify("zsh -c ls", workspace=str(ws)).reason
    assert classify("zsh -f -c ls", workspace=str(ws)).level == "safe"


# ---- every program that can run unprompted has a table ------------------------------------------------

_BY_KIND = {"eval", "trap", "source", ".", "alias", "cd", "pushd", "popd", "ssh", "script", "su", "runuser", "sg",
            "crontab", "at", "batch", "herald"}
_PROBES = ("", " x", " x y", " -h", " --help", " --version", " -V", " status", " ls", " list", " -l")


def _universe() -> set[str]:
    rules = {n[4:] for n in dir(Checker) if n.startswith("cmd_")}
    return (set(READ_ONLY) | rules | set(_COMPRESSORS) | set(WRAPPERS) | set(SHELLS) | set(LANGS) |
            set(_DB_CLIENTS) | set(RUNNERS) | _BY_KIND)


def _runs_unprompted(name: str, where: str) -> bool:
    return any(classify(name + probe, workspace=where).level == "safe" for probe in _PROBES)


def test_every_program_that_runs_unprompted_has_an_option_table(ws: Path) -> None:
    unprompted = {n for n in _universe() if _runs_unprompted(n, str(ws))}
    assert len(unprompted) > 350  # the audit's count; a large drop means the probe broke
    missing = sorted(n for n in unprompted if spec_for(n) is None)
    assert not missing, missing


def test_an_option_not_in_the_table_asks_for_every_such_program(ws: Path) -> None:
    lax = []
    for name in sorted(n for n in _universe() if _runs_unprompted(n, str(ws))):
        spec = spec_for(name)
        if spec is None or spec.free:  # free: reads no options (echo, test) or asks whenever it runs anything
            continue
        verdict = classify(f"{name} --zz-not-an-option x", workspace=str(ws))
        if verdict.level == "safe":
            lax.append(name)
    assert not lax, lax


def test_a_program_a_rule_knows_without_a_table_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Checker, "cmd_frobnicate", lambda self, args: None, raising=False)
    assert classify("frobnicate").level == "dangerous"
    assert "no table of its options" in classify("frobnicate").reason
    monkeypatch.delitem(OPTIONS, "ls")
    assert classify("ls").level == "dangerous"


def test_tables_only_name_real_option_shapes() -> None:
    for name, spec in OPTIONS.items():
        for opt in [*spec.flags, *spec.long_args, *spec.risky]:
            assert re.fullmatch(r"(--?[\w.+#?:@^~,=!$-]+|[\w.+-]+)", opt), (name, opt)
    assert os.sep == "/"

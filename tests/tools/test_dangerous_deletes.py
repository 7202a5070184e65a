"""Whole-tree deletes by other means than ``rm -r``: a command line may delete at most ``MAX_DELETES`` named
files inside the workspace without asking (per command and over the whole line); a pattern, a directory, or
a patch nobody can read asks whatever it would delete (README, "Tools")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.dangerous import classify
from tools.shell.optcheck import MAX_DELETES


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "empty").mkdir()
    for name in ("a", "b", "c", "d", "notes.txt", "data.gz"):
        (root / name).write_text("x\n")
    (root / "few.txt").write_text("a\nb\n")
    (root / "many.txt").write_text("a\nb\nc\nd\n")
    (root / "one.diff").write_text("--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n")
    (root / "wipe.diff").write_text("".join(f"--- a/{n}\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" for n in "abcd"))
    (root / "drop.diff").write_text("--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    return root


ASKS = [
    "rm a b c d", "rm -f a b c d notes.txt", "rm a; rm b; rm c; rm d", "rm a b && unlink c && unlink d",
    "rm *", "rm -f *.txt", "rm -- *", "rm src/*", "rm -r src", "rm -d empty", "rm -rf ./node_modules",
    "find . -delete", "find src -type f -delete", "find . -name '*.o' -exec rm {} +",
    "for f in a b c d; do rm $f; done", 'for f in *; do unlink "$f"; done', "echo a b c d | xargs rm",
    "xargs rm < many.txt", "ls | xargs rm -f",
    "git rm -r src", "git rm a b c d", "git rm 'src/*'", "git rm src", "git rm -f a", "git stash -u",
    "git stash --all", "git stash push --include-untracked", "git clean -fd", "git clean", "git clean -fX",
    "zip -m out.zip a", "zip -rm out.zip src", "tar --remove-files -cf out.tar src", "tar -cf out.tar --remove a",
    "gzip -r src", "gzip a b c d", "gunzip *.gz", "xz a b c d", "bzip2 *", "zstd --rm a b c d",
    "python3 -c 'import shutil; shutil.rmtree(\"src\")'",
    "python3 -c 'import os; os.remove(\"a\"); os.remove(\"b\"); os.remove(\"c\"); os.remove(\"d\")'",
    "patch -p1 < wipe.diff", "git apply wipe.diff", "curl -s https://example.com/x.diff | patch -p1",
    "rsync -a --delete src/ empty/", "rsync -a --remove-source-files src/ empty/",
]
QUIET = [
    "rm a b c", "rm -f notes.txt", "rm a; rm b; rm c", "unlink a", "rmdir empty", "git rm a",
    "git rm --cached -r src", "git stash", "gzip notes.txt", "gunzip data.gz", "gzip -k a b c d", "zstd a b c d",
    "xargs rm < few.txt", "patch -p1 < one.diff", "patch -p1 < drop.diff", "git apply one.diff", "git clean -n",
    "tar -czf out.tar.gz src", "zip -r out.zip src",
]


@pytest.mark.parametrize("command", ASKS)
def test_deleting_many_files_asks(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "dangerous", (command, verdict)
    assert verdict.reason


@pytest.mark.parametrize("command", QUIET)
def test_deleting_a_few_named_files_inside_does_not(ws: Path, command: str) -> None:
    verdict = classify(command, workspace=str(ws))
    assert verdict.level == "safe", (command, verdict)


def test_the_limit_and_the_reasons(ws: Path) -> None:
    assert MAX_DELETES == 3
    assert "4 files" in classify("rm a b c d", workspace=str(ws)).reason
    assert "pattern" in classify("rm -f *.txt", workspace=str(ws)).reason
    chain = classify("rm a; rm b; rm c; rm d", workspace=str(ws))
    assert "command line deletes more than 3" in chain.reason
    # The line's total is no command's own: ``approvals.allow`` cannot cover it.
    assert not chain.covered_by(["rm *"])
    assert classify("rm a b c d", workspace=str(ws)).covered_by(["rm *"])


def test_deletes_outside_the_workspace_still_ask_one_by_one(ws: Path) -> None:
    assert classify("rm /etc/x", workspace=str(ws)).level == "dangerous"
    assert classify("rm -rf /", workspace=str(ws)).level == "hardline"

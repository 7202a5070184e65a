"""SQL handed to a database client: only plain reads go without a person's approval.

Herald keeps its own state in a database; any statement that is not a plain SELECT (or a read-only
``.tables``/``.schema``-style client command) may change someone's data, so it asks. The reasons name the
worst kinds (DROP, TRUNCATE, DELETE without WHERE) in the words people know.
"""

from __future__ import annotations

import re

_READ_STARTS = frozenset({"select", "with", "explain", "show", "describe", "desc", "values", "table"})
# Words that make a statement starting like a read write after all (``WITH d AS (DELETE ...)``,
# ``SELECT ... INTO``, ``FOR UPDATE``); statements that start otherwise ask anyway.
_WRITE_WORDS = re.compile(
    r"\b(insert|update|delete|merge|upsert|drop|alter|create|truncate|grant|revoke|attach|detach|copy|into|"
    r"lock)\b"
)
# Functions that act from inside a SELECT: files, processes, extensions, sequences, other sessions.
_SIDE_EFFECTS = re.compile(
    r"\b(pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile|pg_read_file|"
    r"pg_read_binary_file|pg_ls_dir|lo_import|lo_export|lo_unlink|lo_from_bytea|lo_put|setval|nextval|"
    r"dblink_exec|dblink|load_extension|writefile|readfile|edit|sys_exec|sys_eval|pg_advisory_lock|"
    r"pg_switch_wal|pg_create_restore_point|pg_promote|pg_sleep|sleep|benchmark|load_file|set_config)\s*\("
)
_READ_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    "database_list", "compile_options", "integrity_check", "quick_check", "user_version", "schema_version",
    "page_count", "page_size", "journal_mode", "function_list", "collation_list", "pragma_list", "encoding",
    "foreign_keys", "application_id", "freelist_count", "data_version", "module_list",
})
_READ_DOT = frozenset({
    ".tables", ".table", ".schema", ".indexes", ".indices", ".headers", ".header", ".mode", ".databases",
    ".show", ".help", ".quit", ".exit", ".width", ".timer", ".print", ".echo", ".stats", ".dbinfo",
    ".fullschema", ".nullvalue", ".separator", ".lint", ".dump", ".eqp", ".explain", ".changes", ".bail",
    ".limits", ".dbconfig", ".sha3sum", ".version",
})
_READ_META = re.compile(r"^\\(?:d\S*|l\+?|x(?:\s+\S+)?|conninfo|q|\?|h(?:elp)?\b.*|timing.*|pset.*|echo.*|"
                        r"encoding|c(?:onnect)?\b.*|dn\S*|df\S*|dv\S*|du\S*|dx\S*|sf\S*.*|sv\S*.*)$")


def _strip(text: str) -> str:
    """Comments out; string literals emptied (their contents never decide anything)."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if (ch == "-" and text.startswith("--", i)) or (ch == "#" and (i == 0 or text[i - 1] in " \t\n;")):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
            continue
        if ch in "'\"`":
            end = i + 1
            while end < n and text[end] != ch:
                end += 2 if text[end] == "\\" else 1
            out.append(ch + ch if ch != '"' and ch != "`" else text[i:end + 1])
            i = end + 1
            continue
        if ch == "$" and (m := re.match(r"\$(\w*)\$", text[i:])):
            tag = m.group()
            end = text.find(tag, i + len(tag))
            out.append("''")
            i = n if end < 0 else end + len(tag)
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def shell_escapes(text: str) -> list[str]:
    """Shell commands run by the client itself: sqlite ``.shell``/``.system``, psql and mysql ``\\!``."""
    found = []
    for line in text.split("\n"):
        m = re.match(r"\s*(?:\.shell|\.system|\\!|system)\s+(.*)$", line)
        if m:
            found.append(m.group(1))
    return found


def problems(text: str) -> list[str]:
    """Why this SQL (statements, sqlite dot commands, psql backslash commands) is not a plain read."""
    found: list[str] = []
    plain: list[str] = []
    for line in _strip(text).split("\n"):
        stripped = line.strip()
        if re.match(r"system\s", stripped.lower()):
            found.append("the client command system runs a shell command")
            continue
        if stripped.startswith("."):
            word = stripped.split()[0].lower()
            if word not in _READ_DOT:
                found.append(f"the client command {word} reaches outside a plain read")
            continue
        if stripped.startswith("\\"):
            if not _READ_META.match(stripped):
                found.append(f"the client command {stripped.split()[0]} reaches outside a plain read")
            continue
        plain.append(line)
    for stmt in " ".join(plain).split(";"):
        s = stmt.strip().lower()
        if not s:
            continue
        first = re.match(r"[a-z_]+", s)
        head = first.group() if first else s[:1]
        if re.search(r"\bdrop\s+(?:table|database|schema|view|index|user|role|owned)\b", s):
            found.append("SQL DROP deletes data")
        elif re.search(r"\btruncate\b", s):
            found.append("SQL TRUNCATE deletes every row")
        elif re.search(r"\bdelete\s+from\b", s) and not re.search(r"\bwhere\b", s):
            found.append("SQL DELETE without WHERE deletes every row")
        elif head == "pragma":
            m = re.match(r"pragma\s+(?:\w+\.)?(\w+)\s*(.*)$", s)
            if not m or m.group(1) not in _READ_PRAGMAS or "=" in m.group(2):
                found.append("this SQL PRAGMA changes the database")
        elif head not in _READ_STARTS or (head == "explain" and re.match(r"explain\s+analy[sz]e", s)):
            found.append(f"SQL {head.upper()} changes the database" if head else "SQL that is not a plain read")
        elif _WRITE_WORDS.search(s):
            found.append("SQL that writes inside a read changes the database")
        elif _SIDE_EFFECTS.search(s):
            found.append("this SQL calls a function that acts outside a plain read")
    return found

"""agent_core/sdk.py: the openai SDK with its ``openai.types`` packages filled name by name as they are used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent_core.sdk import _reexports

REPO = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_only_what_is_asked_for_is_imported_and_it_is_the_sdks_own() -> None:
    code = """
import sys
from agent_core.sdk import ChatCompletion, openai
assert "openai.types.responses.response" not in sys.modules
assert "openai.types.graders" not in sys.modules
from openai.types.responses import Response
from openai.types.responses.response import Response as Direct
assert Response is Direct
assert openai.types.chat.ChatCompletion is ChatCompletion
assert openai.types.Batch.__module__ == "openai.types.batch"
assert not hasattr(openai.types, "NoSuchName")
names = {}
exec("from openai.types.shared import *", names)
assert "Reasoning" in names
print(sum(1 for m in sys.modules if m.startswith("openai.types")) < 200)
"""
    assert run(code) == "True"


def test_a_client_call_parses_its_answer() -> None:
    from agent_core.llm import Endpoint, LLMClient
    from tests.fakes.llm import FakeLLMThread, Reply

    with FakeLLMThread() as llm:
        llm.fake.responder = lambda request: Reply("hello")
        for stream in (False, True):
            client = LLMClient([Endpoint(llm.base_url, "m")], max_retries=0, stream=stream)
            assert client.complete([{"role": "user", "content": "hi"}])["content"] == "hello"


def test_a_package_init_that_does_more_than_reexport_is_imported_as_written(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text('"""Doc."""\nfrom __future__ import annotations\n'
                     'from .a import A as A\nfrom .b import B, C as D\n')
    assert _reexports(str(plain)) == {"A": ("a", "A"), "B": ("b", "B"), "D": ("b", "C")}
    for body in ("from .a import A\nX = 1\n", "from .a import *\n", "from ..a import A\n", "import os\n",
                 "from .a.b import A\n", "if True:\n    from .a import A\n"):
        other = tmp_path / "other.py"
        other.write_text(body)
        assert _reexports(str(other)) is None, body

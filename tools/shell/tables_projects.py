"""What build and test runners may be asked without running project code: the options that only print
their version (``pytest -v`` is verbose and runs the tests; ``make help`` runs a Makefile target, so
neither is here) and the subcommands that only read, each with its options.

A few runners run code named by a file in the project even to print their version: rustup runs the
toolchain a ``rust-toolchain.toml`` names, yarn the ``yarnPath`` of ``.yarnrc.yml``, maven the core
extensions of ``.mvn/extensions.xml``. With such a file in the working directory or above it (inside the
workspace), they ask (``PROJECT_FILES``).
"""

from __future__ import annotations

from tools.shell.options import Spec
from tools.shell.options import spec as S

_V = frozenset({"--version"})
VERSION_ONLY: dict[str, frozenset[str]] = {
    "make": frozenset({"--version", "-v", "-h", "--help"}), "cmake": frozenset({"--version", "-h", "--help"}),
    "ninja": frozenset({"--version", "-h"}), "meson": frozenset({"--version", "-h", "--help"}),
    "pytest": frozenset({"--version", "-V"}), "tox": _V, "nox": frozenset({"--version", "-h", "--help"}),
    "npm": frozenset({"--version", "-v", "-h", "--help"}), "pnpm": frozenset({"--version", "-v", "-h", "--help"}),
    "yarn": frozenset({"--version", "-v", "-h", "--help"}), "npx": _V, "pnpx": _V, "bunx": _V,
    "uv": frozenset({"--version", "-V", "-h", "--help"}), "uvx": frozenset({"--version", "-V"}),
    "poetry": frozenset({"--version", "-V", "-h", "--help"}), "pipenv": _V, "pdm": frozenset({"--version", "-V"}),
    "hatch": _V, "rye": _V, "pip": frozenset({"--version", "-V", "-h", "--help"}), "pipx": _V,
    "cargo": frozenset({"--version", "-V", "-h", "--help"}), "go": frozenset({"version", "help"}),
    "mvn": frozenset({"--version", "-v", "-h", "--help"}), "gradle": frozenset({"--version", "-v", "-h", "--help"}),
    "ant": frozenset({"-version", "-h", "-help"}), "rake": frozenset({"--version", "-V"}),
    "bundle": frozenset({"--version", "-v"}), "gem": frozenset({"--version", "-v", "-h", "--help"}),
    "composer": frozenset({"--version", "-V"}), "swift": frozenset({"--version", "-version"}),
    "dotnet": frozenset({"--version", "--info", "--list-sdks", "--list-runtimes", "-h", "--help"}),
    "jest": _V, "vitest": _V, "tsc": frozenset({"--version", "-v", "-h", "--help"}),
    "eslint": frozenset({"--version", "-v", "-h", "--help"}), "mypy": frozenset({"--version", "-V", "-h", "--help"}),
    "nose2": _V, "behave": _V, "just": frozenset({"--version", "-V", "-h", "--help"}), "task": _V,
    "invoke": frozenset({"--version", "-V"}), "scons": _V, "bazel": _V, "buck": _V,
    "pre-commit": frozenset({"--version", "-V", "-h", "--help"}),
    "conda": frozenset({"--version", "-V", "-h", "--help"}),
    "mamba": frozenset({"--version", "-V"}), "R": _V, "Rscript": _V, "julia": frozenset({"--version", "-v"}),
    "node-gyp": frozenset({"--version", "-v"}),
}

_NPM = ("json long parseable global depth= all omit= include= link package-lock-only prefix= workspace= workspaces "
        "include-workspace-root registry= unicode production dev loglevel= silent quiet verbose color= no-color "
        "help")
_NPM_S = "lpgaswqdh"
_PIP = ("verbose quiet isolated require-virtualenv no-input disable-pip-version-check no-color "
        "no-python-version-warning proxy= timeout= retries= cert= client-cert= index-url= extra-index-url= "
        "no-index find-links= trusted-host= help")
_PIP_S = "vqhi: f:"
_GEM = "local remote both details versions all exact prerelease no-versions quiet verbose help"
READS: dict[str, dict[str, Spec]] = {
    "npm": {**dict.fromkeys(("ls", "list", "ll", "la", "view", "info", "show", "v", "outdated", "whoami", "ping",
                             "search", "s", "se", "find", "explain", "why", "root", "prefix", "bin"), S(_NPM_S, _NPM)),
            "config": S(_NPM_S, _NPM, subs={"get": S(_NPM_S, _NPM), "list": S(_NPM_S, _NPM), "ls": S(_NPM_S, _NPM)}),
            # ``npm audit fix`` installs, ``npm fund PKG`` opens a browser: no operand is harmless.
            "audit": S(_NPM_S, _NPM + " audit-level=", subs={"signatures": S(_NPM_S, _NPM)}),
            "fund": S(_NPM_S, _NPM, subs={})},
    "pnpm": {**dict.fromkeys(("ls", "list", "ll", "la", "view", "info", "outdated", "why", "root", "bin"),
                             S("PDgr", "json long parseable global depth= recursive prod dev filter= dir= help")),
             "audit": S("PD", "json prod dev audit-level= ignore-registry-errors help")},
    "yarn": {**dict.fromkeys(("list", "info", "why", "outdated"), S("h", "json depth= pattern= help")),
             "config": S("h", "json help", subs={"get": S("h", "json help"), "list": S("h", "json help")}),
             "audit": S("h", "json level= groups= help")},
    "pip": {**dict.fromkeys(("list", "show", "freeze", "check", "search", "inspect", "debug"), S(
        "ouelfr: " + _PIP_S, _PIP + " outdated uptodate editable local user path= pre format= not-required "
                                    "exclude-editable include-editable exclude= files all requirement= verbose")),
            "index": S(_PIP_S, _PIP, subs={"versions": S(_PIP_S, _PIP + " pre")}),
            "config": S(_PIP_S, _PIP + " global user site", subs={"list": S(_PIP_S, _PIP + " global user site"),
                                                                "get": S(_PIP_S, _PIP + " global user site"),
                                                                "debug": S(_PIP_S, _PIP)}),
            "cache": S(_PIP_S, _PIP, subs={"dir": S(_PIP_S, _PIP), "info": S(_PIP_S, _PIP),
                                           "list": S(_PIP_S, _PIP + " format=")})},
    "cargo": {**dict.fromkeys(("tree", "metadata", "search", "locate-project", "pkgid", "verify-project",
                               "read-manifest", "version", "help", "info"), S(
        "qvhpe i: p: e:", "quiet verbose help manifest-path= package= workspace all-features no-default-features "
                          "features= target= depth= prefix= edges= invert= format= charset= no-dedupe duplicates "
                          "format-version= no-deps frozen locked offline limit= registry= index= message-format= "
                          "workspace-root color="))},
    # go's flags are words: ``-json``, ``-mod=mod``.
    "go": {"version": S("-m -v"), "env": S("-json -changed"), "doc": S("-all -c -cmd -short -src -u"),
           "help": S(""), "fmt": S("-n -x -mod:"),
           "list": S("-json -deps -e -m -u -find -test -versions -retracted -compiled -f: -mod: -modfile: -tags: "
                     "-reuse:")},
    "uv": {"tree": S("qv", "depth= invert universal prune= package= no-dedupe outdated frozen locked offline "
                           "python= all-groups group= only-group= no-dev quiet verbose help"),
           "python": S("qv", "quiet verbose help", subs={"list": S("qv", "all-versions all-platforms only-installed "
                                                                      "only-downloads show-urls quiet verbose help"),
                                                         "find": S("qv", "quiet verbose help system"),
                                                         "dir": S("qv", "bin quiet verbose help")}),
           "help": S("")},
    "poetry": {"show": S("tlTaq", "tree latest top-level outdated all why only= without= with= no-dev quiet "
                                  "no-ansi ansi help"),
               "check": S("q", "lock strict quiet no-ansi help"),
               "env": S("q", "quiet help", subs={"info": S("pe", "path executable full-path help"),
                                                 "list": S("", "full-path help")})},
    "gem": dict.fromkeys(("list", "search", "info", "query", "environment", "env", "which", "contents",
                          "specification", "spec"), S("lrbdaeqvh", _GEM)),
    "conda": {"list": S("nepfjq", "name= prefix= json export explicit full-name quiet help revisions"),
              "info": S("aejsq", "all envs json system quiet base help"),
              "search": S("fq", "full-name json info quiet help channel= override-channels"),
              "env": S("q", "quiet help", subs={"list": S("q", "json quiet help")})},
}
# A verb whose operands are files it rewrites (``go fmt ./...``), like ``ruff format``.
REWRITES = {"go": frozenset({"fmt"})}
PROJECT_FILES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("cargo", "rustc", "rustup"), ("rust-toolchain", "rust-toolchain.toml", ".cargo/config",
                                                   ".cargo/config.toml")),
    "yarn": (".yarnrc.yml", ".yarnrc"), "mvn": (".mvn/extensions.xml", ".mvn/jvm.config"),
}

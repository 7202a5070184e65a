"""Reading shell command lines for the dangerous-command classifier (``tools/dangerous.py``).

- ``parse``: tree-sitter-bash turns a command line into the simple commands it contains, each with its
  words resolved statically where possible, its redirects and what feeds its standard input.
- ``static``: what a pipeline stage prints when that is fixed by the text (echo, printf, base64 -d...).
- ``code``: commands hidden in code handed to an interpreter (python, perl, ruby, node, php, lua, awk,
  sed) and in SQL handed to a database client.
- ``rules``: the verdict for one simple command; ``check``: the walk over a whole script.

Nothing here imports from the gateway: tools may depend on nothing above them.
"""

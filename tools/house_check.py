# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The house rules `tox -e pep8` keeps: small modules and functions in rp_reporter/, a
short README, and documents that describe the product as it is (how they were made
lives in git).  Prints each breach as file:line: what; exits 1 on any.

    python -m tools.house_check
"""

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_README_LINES = 150
# The licence header every module opens with is not the module's own size.
LICENCE_END = "# under the License.\n"
# Words of a document's making: an issue's number, a commit, a run's number, a fix.
MAKING = re.compile(r"\bissues? \d+|\brun \d+\b|\bruns? so far\b|\(fixed\)|\bfixed in\b"
                    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def code_breaches(root):
    for path in sorted((root / "rp_reporter").rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(root)
        lines = len(text.partition(LICENCE_END)[2].lstrip("\n").splitlines() if LICENCE_END in text
                    else text.splitlines())
        if lines > MAX_MODULE_LINES:
            yield f"{name}:1: {lines} lines (at most {MAX_MODULE_LINES}: split it by concern)"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    yield (f"{name}:{node.lineno}: {node.name}() is {length} lines (at most "
                           f"{MAX_FUNCTION_LINES})")


def licence_breaches(root):
    """Every Python module of the project opens with the licence header."""
    for tree in ("rp_reporter", "tests", "tools", "shims"):
        for path in sorted((root / tree).rglob("*.py")):
            if LICENCE_END not in path.read_text():
                yield f"{path.relative_to(root)}:1: no licence header (the Apache-2.0 one)"


def document_breaches(root):
    for path in [root / "README.md", *sorted((root / "doc" / "source").rglob("*.md"))]:
        name = str(path.relative_to(root))
        text = path.read_text()
        if name == "README.md" and len(text.splitlines()) >= MAX_README_LINES:
            yield f"{name}:1: {len(text.splitlines())} lines (under {MAX_README_LINES})"
        for number, line in enumerate(text.splitlines(), 1):
            for found in MAKING.finditer(line):
                yield f"{name}:{number}: {found.group(0)!r} tells how the document was made"


# A document named by its path from the project's root (in code, samples, units, docs).
DOC_PATH = re.compile(r"(?<![\w/.])doc/[\w./-]*\w\.(?:md|rst|json)\b")
NAMING_TREES = ("rp_reporter", "etc", "share", "shims", "tools", "tests", "doc/source")
# pbr's files made from the git history, which names what once was.
HISTORY = {"ChangeLog", "AUTHORS"}


def dangling_document_paths(root):
    """Each ``doc/...`` path named in the project's files names a file that exists (the
    samples' option help too: a moved guide left them pointing at nothing)."""
    files = [root / "README.md", *(p for tree in NAMING_TREES
                                   for p in sorted((root / tree).rglob("*"))
                                   if p.is_file() and "__pycache__" not in p.parts
                                   and p.name not in HISTORY)]
    for path in files:
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for found in DOC_PATH.finditer(line):
                if not (root / found.group(0)).exists():
                    yield (f"{path.relative_to(root)}:{number}: names {found.group(0)}, "
                           f"which does not exist")


def main(root=ROOT):
    breaches = [*code_breaches(root), *licence_breaches(root), *document_breaches(root),
                *dangling_document_paths(root)]
    for breach in breaches:
        print(breach)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())

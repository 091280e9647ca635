#!/usr/bin/env python3
"""Extracts the C++ examples of the documentation, so that the build compiles them.

    tools/doc_examples.py --out BUILD/doc_examples README.md docs/*.md

Every fenced block opened with ```cpp in a page becomes one file,
<out>/<page>_<n>.cc: <page> is the file name without ".md", lowercased
(README.md gives "readme"), and <n> counts the page's cpp blocks from 1.
Each block must be a complete translation unit: its own #include lines,
nothing taken from the text around it. A #line directive maps compiler
messages back to the page and line of the block. Blocks that are not C++
programs use another fence language (```text, ```sh, ```cmake) and are
left alone.

Prints one line per file on stdout, "object <path>" or, for a block that
defines `int main`, "program <path>", for docs/CMakeLists.txt. Files are
rewritten only when their text changed, so an unchanged block is not
compiled again; files of blocks that no longer exist are removed.
Exit status: 0, or 1 when a cpp fence is left open or a block is empty.
"""

import argparse
import pathlib
import re
import sys

OPEN = re.compile(r"^(\s*)```\s*cpp\s*$")
FENCE = re.compile(r"^\s*```")
MAIN = re.compile(r"^\s*int\s+main\s*\(", re.MULTILINE)


def blocks(page):
    """Yields (first line number, text) for each ```cpp block of the page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            # Skip over blocks of other languages whole, so that a ```cpp
            # written inside one of them is not taken for an opening.
            if FENCE.match(lines[i]):
                i += 1
                while i < len(lines) and not FENCE.match(lines[i]):
                    i += 1
            i += 1
            continue
        indent = len(m.group(1))
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and not FENCE.match(lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f"{page}:{start}: ```cpp block is not closed")
        if not "".join(body).strip():
            raise SystemExit(f"{page}:{start}: empty ```cpp block")
        yield start + 1, "\n".join(body) + "\n"
        i += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path, help="directory of the generated files")
    parser.add_argument("pages", nargs="+", type=pathlib.Path, help="Markdown pages")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    written = set()
    for page in sorted(args.pages):
        page = page.resolve()
        stem = page.name[: -len(".md")] if page.name.endswith(".md") else page.name
        stem = re.sub(r"[^a-z0-9_]", "_", stem.lower())
        for n, (line, text) in enumerate(blocks(page), start=1):
            path = args.out / f"{stem}_{n}.cc"
            source = f'#line {line} "{page}"\n{text}'
            if not path.exists() or path.read_text(encoding="utf-8") != source:
                path.write_text(source, encoding="utf-8")
            written.add(path.name)
            print(("program " if MAIN.search(text) else "object ") + str(path))
    for old in args.out.glob("*.cc"):
        if old.name not in written:
            old.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())

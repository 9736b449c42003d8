#!/usr/bin/env python3
"""Lists every function in the C++/CUDA sources longer than a limit (default 150 lines, signature to closing brace).

A function longer than a screen is usually a phase without a name (STYLE.md). The sources are read as text:
comments, string and character literals and preprocessor lines are blanked, then braces are matched. A brace
opens a function body when it stands at namespace or class scope and the statement before it has a parameter
list (`)` before it, after at most qualifiers, a trailing return type or a constructor's initialisers); lambdas
and blocks inside a function count towards that function.

usage: scripts/check-function-length.py [--max N] [--verbose] DIR_OR_FILE...   (exit 1 if any function is longer)
"""
import argparse
import os
import re
import sys

EXTENSIONS = (".cpp", ".cc", ".cu", ".hpp", ".h", ".cuh")
QUALIFIERS = {"const", "override", "final", "noexcept", "mutable", "volatile", "try"}
NOT_NAMES = {"__launch_bounds__", "alignas", "__attribute__", "decltype", "__declspec"}
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|\bextern\s+\"C\"\s*$")


def blank(text):
    """Comments, literals and preprocessor lines replaced by spaces; newlines kept so line numbers stay right."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":   # a directive, with its continuation lines
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
        elif text.startswith('R"', i):   # raw string R"delim( ... )delim"
            open_paren = text.find("(", i)
            delim = text[i + 2:open_paren]
            end = text.find(")" + delim + '"', open_paren)
            end = n if end < 0 else end + len(delim) + 2
            out.extend("\n" if ch == "\n" else " " for ch in text[i:end])
            i = end
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):   # 1'000 digit separators
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) - i + 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def initialiser(head):
    """True for the head of a brace initialiser after a parameter list: a constructor's `: a_{x}` (the head ends in
    a member's name), not a body (which follows `)`, a qualifier or a trailing return type)."""
    depth, end = 0, -1
    for k, ch in enumerate(head):   # the end of the first parameter list
        depth += ch == "("
        depth -= ch == ")"
        if ch == ")" and depth == 0:
            end = k
            break
    tail = head[end + 1:]
    last = re.search(r"(\w+)\s*$", tail)
    return bool(last) and ":" in tail.replace("::", "") and "->" not in tail and last.group(1) not in QUALIFIERS


def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    code = blank(text)
    found = []
    stack = []          # per open brace: "scope", "function" or "block"
    stmt_start = 0      # where the current statement at this level began
    i = 0
    line_of = lambda pos: code.count("\n", 0, pos) + 1
    while i < len(code):
        c = code[i]
        if c == "{":
            in_function = any(kind in ("function", "init") for kind, _, _ in stack)
            head = code[stmt_start:i].strip()
            if in_function:
                stack.append(("block", i, None))
            elif SCOPE.search(head) or head.endswith("=") or head == "" or "(" not in head:
                stack.append(("scope" if SCOPE.search(head) or head == "" else "block", i, None))
            elif initialiser(head):
                stack.append(("init", i, None))
            else:
                names = [w for w in re.findall(r"([~\w:]+|operator\s*\S+)\s*\(", head) if w not in NOT_NAMES]
                stack.append(("function", i, (names[0] if names else "?", stmt_start)))
            if not any(kind == "init" for kind, _, _ in stack):   # an initialiser belongs to the statement
                stmt_start = i + 1
        elif c == "}":
            kind = None
            if stack:
                kind, _, info = stack.pop()
                if kind == "function" and not any(k == "function" for k, _, _ in stack):
                    name, start = info
                    first = line_of(start + len(code[start:]) - len(code[start:].lstrip()))
                    found.append((name, first, line_of(i)))
            if not any(kind == "init" for kind, _, _ in stack) and kind != "init":
                stmt_start = i + 1   # `a_{x}` in a constructor's head does not end the statement
        elif c == ";" and not any(kind == "function" for kind, _, _ in stack):
            stmt_start = i + 1
        i += 1
    return found


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, _, files in os.walk(p):
            for f in sorted(files):
                if f.endswith(EXTENSIONS):
                    yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--max", type=int, default=150, help="longest allowed function, in lines (default 150)")
    ap.add_argument("--verbose", action="store_true", help="list the five longest functions as well")
    args = ap.parse_args()
    everything, too_long = [], []
    for path in sources(args.paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            for name, first, last in functions(f.read()):
                lines = last - first + 1
                everything.append((lines, path, first, name))
                if lines > args.max:
                    too_long.append((lines, path, first, name))
    for lines, path, first, name in sorted(too_long, reverse=True):
        print(f"{path}:{first}: {name} is {lines} lines (at most {args.max})")
    if args.verbose:
        for lines, path, first, name in sorted(everything, reverse=True)[:5]:
            print(f"  {lines:4d} lines  {name}  {path}:{first}")
    print(f"{len(everything)} functions, {len(too_long)} longer than {args.max} lines")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())

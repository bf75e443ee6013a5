#!/usr/bin/env python3
"""Lists functions longer than a limit (default 100 lines, header to closing brace) in C++ files.

Usage: scripts/long_functions.py [--limit N] [paths...]   (default path: src/)
A rough parser, good enough for this code base: comments, literals and preprocessor lines are stripped, braces are
matched, and a brace opened at namespace or class scope after a header with '(' (and no '=')
starts a function; lambdas and nested blocks count towards the function around them.
"""
import argparse
import pathlib
import re
import sys


def strip(text):
    # Comments and string/char literals, keeping newlines so line numbers stay right.
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.S)
    text = pattern.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)
    # Preprocessor lines (with their continuations).
    return re.sub(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text,
                  flags=re.M)


def functions(text):
    text = strip(text)
    stack = []  # 'scope' or ('fn', start_line, name)
    header_start = 0
    line = 1
    out = []
    for i, c in enumerate(text):
        if c == '\n':
            line += 1
        elif c in ';{}' and (not stack or stack[-1] == 'scope'):
            if c == '{':
                header = text[header_start:i]
                h = header.strip()
                scope_kw = re.match(r'^(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b', h, re.S)
                if '(' in h and not scope_kw and '=' not in h.split('(')[0]:
                    lead = len(header) - len(header.lstrip())
                    start = line - text[header_start + lead:i].count('\n')
                    name = re.findall(r'([\w:~<>]+)\s*\(', h)
                    stack.append(('fn', start, name[0] if name else h[:40]))
                else:
                    stack.append('scope')
            elif c == '}':
                if stack:
                    stack.pop()
            header_start = i + 1
        elif c == '{':
            stack.append('block')
        elif c == '}':
            top = stack.pop()
            if isinstance(top, tuple):
                out.append((top[2], top[1], line))
                header_start = i + 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--limit', type=int, default=100)
    ap.add_argument('paths', nargs='*', default=['src'])
    a = ap.parse_args()
    found = []
    for p in a.paths:
        files = [pathlib.Path(p)] if pathlib.Path(p).is_file() else sorted(
            f for f in pathlib.Path(p).rglob('*') if f.suffix in ('.cpp', '.hpp', '.cu', '.h'))
        for f in files:
            for name, start, end in functions(f.read_text(errors='replace')):
                n = end - start + 1
                if n > a.limit:
                    found.append((n, f'{f}:{start}', name))
    for n, where, name in sorted(found, reverse=True):
        print(f'{n:5d}  {where}  {name}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""The few texts libyaml (PyYAML's C parser) reads otherwise than yaml.v2 (the device plugin's,
through sigs.k8s.io/yaml), made into texts libyaml reads as yaml.v2 does.

The config reader parses with libyaml because yaml.v2 is a port of it: the same syntax but for
these corners, found by running the plugin's own Go on 31,000 configs (gopkg.in/yaml.v2
v2.4.0, vendored by kubernetes/kubernetes as ``vendor/gopkg.in/yaml.v2``):

- ``{a:}``: in a flow collection, a plain scalar ends at a ``:`` only if a blank follows it
  (scannerc.go ``yaml_parser_scan_plain_scalar``), so yaml.v2 reads the key ``a:``; libyaml
  stops with "found unexpected ':'".
- ``&a`` twice: yaml.v2 lets the newer anchor win (decode.go ``parser.anchor`` overwrites
  ``doc.anchors``); PyYAML's composer refuses a duplicate anchor.
- ``%YAML 1.2``: yaml.v2 reads only 1.1 (parserc.go ``yaml_parser_process_directives``,
  "found incompatible YAML document"); libyaml reads 1.2 too.
- a byte-order mark starting a line after the first: yaml.v2 reads it as text (readerc.go
  checks only the stream's first bytes for one); libyaml skips it, and the indentation after
  it then breaks.

Every rewrite keeps each line where it was, so a line number still points at the learner's.
"""

from __future__ import annotations

import re

import yaml

BOM = "\ufeff"
_BREAKS = "\r\n\x85\u2028\u2029"
_BLANKZ = " \t" + _BREAKS + "\0"  # yamlprivateh.go is_blankz
_FLOW_ENDS = ",?[]{}"
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\x85": "\\N"}
_ESCAPES |= {"\u2028": "\\L", "\u2029": "\\P"}
MAX_REPAIRS = 200  # each repair ends one error; a text has at most this many before we stop


def hide_boms(text: str) -> tuple[str, str | None]:
    """``text`` with each BOM after its first character replaced by a private-use character it
    does not hold, and that stand-in (libyaml then reads it as text, as yaml.v2 does; the
    composer puts the BOM back). Unchanged, with None, when no BOM starts a line or the text
    holds every private-use character (libyaml's reading is then kept)."""
    if BOM not in text[1:]:
        return text, None
    used = set(text)
    stand_in = next((chr(c) for c in range(0xE000, 0xF900) if chr(c) not in used), None)
    if stand_in is None:
        return text, None
    return text[:1] + text[1:].replace(BOM, stand_in), stand_in


def repair(text: str, exc: yaml.MarkedYAMLError, loader: type[yaml.SafeLoader]) -> str | None:
    """``text`` rewritten past the libyaml error ``exc`` as yaml.v2 would read it, or None when
    yaml.v2 stops there too (the error is then the learner's)."""
    if exc.problem == "found unexpected ':'" and exc.context_mark is not None:
        return _quote_flow_plain(text, exc.context_mark.index)
    if (exc.context or "").startswith("found duplicate anchor"):
        return _rename_redefined_anchors(text, loader)
    return None


def version_problem(text: str, loader: type[yaml.SafeLoader]) -> str | None:
    """yaml.v2's refusal of the first document's ``%YAML`` directive, if it has one other
    than 1.1 (parserc.go ``yaml_parser_process_directives``)."""
    if "%" not in text:  # no directive: no scan
        return None
    scanner = loader(text)
    try:
        while scanner.check_token():
            token = scanner.get_token()  # type: ignore[no-untyped-call]  # PyYAML ships no annotations
            if isinstance(token, yaml.StreamStartToken):
                continue
            if not isinstance(token, yaml.DirectiveToken):
                return None
            if token.name == "YAML" and token.value != (1, 1):
                return "found incompatible YAML document"
    except yaml.YAMLError:
        return None  # the parse says it, with its line
    finally:
        scanner.dispose()
    return None


def _quote_flow_plain(text: str, start: int) -> str | None:
    """The flow plain scalar at ``start`` scanned as yaml.v2 scans it, written back as a
    double-quoted scalar of the same value, with its line breaks after it."""
    value: list[str] = []
    i, end, n = start, start, len(text)
    pending = ""  # blanks or folded breaks that join the next word
    while True:
        at_line_start = i == 0 or text[i - 1] in _BREAKS
        marker = text[i : i + 3] in ("---", "...") and text[i + 3 : i + 4] in ("", *_BLANKZ)
        if at_line_start and marker:  # a document's start or end
            break
        if text[i : i + 1] == "#":
            break
        word = i
        while i < n and text[i] not in _BLANKZ:
            if text[i] in _FLOW_ENDS or (text[i] == ":" and text[i + 1 : i + 2] in ("", *_BLANKZ)):
                break
            i += 1
        if i > word:
            value.append(pending + text[word:i])
            pending, end = "", i
        if i >= n or text[i] not in " \t" + _BREAKS:
            break
        blanks, breaks = "", list[str]()
        while i < n and text[i] in " \t" + _BREAKS:
            if text[i] in " \t":
                blanks += text[i] if not breaks else ""
                i += 1
            else:
                size = 2 if text[i : i + 2] == "\r\n" else 1
                breaks.append("\n" if text[i] in "\r\n\x85" else text[i])  # read_line
                i += size
        if breaks:  # scannerc.go: a first break folds to a space, the rest are kept
            first, rest = breaks[0], breaks[1:]
            pending = (" " if not rest else "".join(rest)) if first == "\n" else "".join(breaks)
        else:
            pending = blanks
    if end == start:
        return None
    written = "".join(value)
    lines = len(re.findall(r"\r\n|[\r\n\x85\u2028\u2029]", text[start:end]))
    quoted = '"' + "".join(_ESCAPES.get(c, c) for c in written) + '"'
    return text[:start] + quoted + "\n" * lines + text[end:]


def _rename_redefined_anchors(text: str, loader: type[yaml.SafeLoader]) -> str | None:
    """``text`` with each anchor defined again renamed, with the aliases after it, so that an
    alias names the newest anchor of its name, as in yaml.v2."""
    scanner = loader(text)
    spans: list[tuple[int, int, str]] = []  # (start, end, new text)
    current: dict[str, str] = {}  # an anchor's name as written -> its name now
    tokens: list[yaml.Token] = []
    try:
        while scanner.check_token():
            tokens.append(scanner.get_token())  # type: ignore[no-untyped-call]  # PyYAML ships no annotations
    except yaml.YAMLError:
        pass  # rename what was scanned; the parse reports the rest
    finally:
        scanner.dispose()
    names = {str(t.value) for t in tokens if isinstance(t, yaml.AnchorToken | yaml.AliasToken)}
    for token in tokens:
        if not isinstance(token, yaml.AnchorToken | yaml.AliasToken):
            continue
        name = str(token.value)
        if isinstance(token, yaml.AnchorToken):
            renamed, serial = name, 0
            while name in current and renamed in names:  # defined before: a fresh name
                renamed, serial = f"{name}-{serial}", serial + 1
            names.add(renamed)
            current[name] = renamed
        mark = "&" if isinstance(token, yaml.AnchorToken) else "*"
        if current.get(name, name) != name:
            spans.append((token.start_mark.index, token.end_mark.index, mark + current[name]))
    if not spans:
        return None
    for begin, finish, new in reversed(spans):
        text = text[:begin] + new + text[finish:]
    return text

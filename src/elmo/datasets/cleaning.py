"""Markup to running text: HTML help pages, roff manual pages, terminal colour codes, and the checks that keep
only sentences of prose (not code, tables, headings or lists of names).

Every function here takes text and returns text, so the readers in ``large_sources`` stay a few lines each
and these rules are tested on small real snippets.
"""

import re
from collections.abc import Callable, Iterable
from html.parser import HTMLParser

# Elements whose text is one paragraph of running text; anything else (tables of figures, menus, scripts) is
# skipped unless it sits inside one of these.
_BLOCKS = frozenset({"p", "li", "dd", "dt", "blockquote", "td", "th", "figcaption", "caption"})
# Elements whose text is never prose: code listings, scripts, styles, navigation.
_SKIPPED = frozenset({"pre", "script", "style", "nav", "head", "title", "svg", "math", "button", "select", "header",
                      "footer", "aside"})
# Navigation written as divs, skipped with all they hold: DocBook's header and footer tables (Prev, Up, Next and
# the neighbouring pages' titles), Sphinx's related-pages bar and sidebar, and any div with role="navigation".
_NAVIGATION_CLASSES = frozenset({"navheader", "navfooter", "related", "sphinxsidebar"})


class _Paragraphs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._parts: list[str] = []
        self._open_blocks = 0
        self._skipping = 0
        # For each open div: "para" (a paragraph: DocBook's <div class="para">), "navigation" (skipped with its
        # content) or "" (a container: its text is read only inside the blocks it holds).
        self._divs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            attributes = dict(attrs)
            classes = set((attributes.get("class") or "").split())
            self._divs.append("navigation" if classes & _NAVIGATION_CLASSES or attributes.get("role") == "navigation"
                              else "para" if "para" in classes else "")
            if self._divs[-1] == "navigation":
                self._skipping += 1
            if self._divs[-1] != "para":
                return
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _BLOCKS or tag == "div":
            self._flush()
            self._open_blocks += 1
        elif tag == "br":
            self._parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            kind = self._divs.pop() if self._divs else ""
            if kind == "navigation":
                self._skipping = max(0, self._skipping - 1)
            if kind != "para":
                return
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCKS or tag == "div":
            self._flush()
            self._open_blocks = max(0, self._open_blocks - 1)

    def handle_data(self, data: str) -> None:
        if self._open_blocks and not self._skipping:
            self._parts.append(data)

    def _flush(self) -> None:
        text = join_wrapped("".join(self._parts).splitlines())
        if text:
            self.paragraphs.append(text)
        self._parts = []

    def close(self) -> None:
        super().close()
        self._flush()


def html_paragraphs(html: str) -> list[str]:
    """The text of each paragraph-like element (``p``, ``li``, ``dd``, table cells...) of an HTML page,
    whitespace collapsed, entities decoded; ``pre``, ``script``, ``style`` and navigation (``nav``, DocBook's
    ``navheader``/``navfooter`` divs, Sphinx's ``related`` and ``sphinxsidebar``) are dropped, inline
    markup (``code``, ``a``, ``em``) keeps its text."""
    parser = _Paragraphs()
    parser.feed(html)
    parser.close()
    return parser.paragraphs


# groff's named characters (groff_char(7)) that stand for a character of text: ``\(bv\(bv`` is ``||`` in bash's
# page; dropped, 13 sentences of manpages-zh lost an operator or a sign.
_ROFF_NAMED = {"bv": "|", "ba": "|", "aq": "'", "dq": '"', "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122",
               "+-": "\u00b1", "mu": "\u00d7", "di": "\u00f7", "de": "\u00b0", "bu": "\u2022", "ha": "^", "ti": "~",
               "sl": "/", "hy": "-", "at": "@", "sh": "#", "Do": "$", "Eu": "\u20ac", "Po": "\u00a3",
               "ct": "\u00a2", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "la": "<", "ra": ">", "<=": "\u2264",
               ">=": "\u2265", "!=": "\u2260", "->": "\u2192", "<-": "\u2190", "ss": "\u00df", "ga": "`",
               "aa": "\u00b4", "ru": "_", "ul": "_",
               # the bracket forms of the quotes and dashes that the rules below read in their \(xx form
               "lq": '"', "rq": '"', "oq": '"', "cq": '"', "em": "-", "en": "-"}

# roff: font and size changes, named characters, and the few escapes that stand for a character.
_ROFF_ESCAPES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)"), ""),  # \fB \fI \fR \fP \f(CW \f[B]
    (re.compile(r"\\s[+-]?\d+"), ""),  # \s-1 \s0
    (re.compile(r"\\\*(?:\[[^\]]*\]|\(..|.)"), ""),  # strings: \*(lq \*R
    (re.compile(r"\\\((?:lq|rq|oq|cq)"), '"'),
    (re.compile(r"\\\((?:em|en)"), "-"),
    # other named characters: groff's for characters of text (groff_char(7)) as those characters, the rest dropped
    (re.compile(r"\\\((..)|\\\[([^\]]*)\]"), lambda match: _ROFF_NAMED.get(match.group(1) or match.group(2), "")),
    # Marks that are no text, where the backslash is not itself escaped (psql's page writes its command \d as
    # \\d): footnote numbers raised and lowered (\u[1]\d, DocBook's links), half-line moves (\u \d), colours
    # (\m[blue] \m[] \m(xx \mx, \M for the background) and the italic corrections \, and \/.
    (re.compile(r"(?<!\\)\\u\[\d+\]\\d"), ""),
    (re.compile(r"(?<!\\)\\[mM](?:\[[^\]]*\]|\(..|.)"), ""),
    (re.compile(r"(?<!\\)\\[ud,/]"), ""),
    (re.compile(r"\\[-e]"), lambda match: "-" if match.group(0) == "\\-" else "\\"),
    (re.compile(r"\\[&|^%:c0 ~]"), lambda match: " " if match.group(0) in ("\\ ", "\\~", "\\0") else ""),
]
# Macros whose arguments are running text set in a font (their quotes group words, they are not text).
_ROFF_TEXT_MACROS = frozenset({"B", "I", "BR", "BI", "IB", "IR", "RB", "RI", "SM", "SB"})
_ROFF_ARGUMENT = re.compile(r'"[^"]*"|\S+')
_ROFF_PARAGRAPH_MACROS = frozenset({"SH", "SS", "PP", "LP", "P", "IP", "HP"})


def roff_text(line: str) -> str:
    for pattern, replacement in _ROFF_ESCAPES:
        line = pattern.sub(replacement, line)
    return line


def roff_paragraphs(source: str) -> list[str]:
    """Paragraphs of a manual page in roff (man macros): text lines joined, a paragraph ends at a blank line
    or a paragraph/heading macro (``.PP``, ``.SH``, ``.TP``...); the tag line after ``.TP`` (an option, a
    name) is a paragraph of its own, not the start of its description; font macros (``.B word``) keep their
    words; comments, other requests and escapes are dropped; ``.nf``..``.fi`` (unfilled: examples,
    synopses) is skipped."""
    paragraphs: list[str] = []
    current: list[str] = []
    unfilled = False
    tag_next = False  # after .TP: the next line of text is the tag

    def flush() -> None:
        text = join_wrapped(current)
        if text:
            paragraphs.append(text)
        current.clear()

    def add(text: str) -> None:
        nonlocal tag_next
        current.append(text)
        if tag_next and text.strip():
            flush()
            tag_next = False

    for raw in source.splitlines():
        line = raw.rstrip()
        if line.startswith((".\\\"", "'\\\"", '.\\"', "\\\"")):
            continue
        if line.startswith((".", "'")):
            macro, _, arguments = line[1:].strip().partition(" ")
            if macro in ("nf", "EX"):
                flush()
                unfilled = True
                tag_next = False
            elif macro in ("fi", "EE"):
                unfilled = False
            elif macro in _ROFF_TEXT_MACROS and not unfilled:
                words = [word.strip('"') for word in _ROFF_ARGUMENT.findall(arguments)]
                # .BR, .IR...: alternate fonts word by word, written without spaces between the words.
                add(roff_text(("" if len(macro) == 2 and macro not in ("SM", "SB") else " ").join(words)))
            else:
                flush()
                # A request between .TP and its tag (.PD 0, .ti) leaves the tag to come; a new paragraph or
                # heading has none.
                tag_next = macro == "TP" or (tag_next and macro not in _ROFF_PARAGRAPH_MACROS)
            continue
        if unfilled:
            continue
        if not line.strip():
            flush()
            continue
        add(roff_text(line))
    flush()
    return paragraphs


_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def join_wrapped(lines: Iterable[str]) -> str:
    """Lines of one wrapped paragraph as one line: no space where Chinese text was wrapped, one elsewhere."""
    joined = ""
    for line in (" ".join(line.split()) for line in lines):
        if not line:
            continue
        if joined and not (_CJK_END.search(joined) and _CJK_START.match(line)):
            joined += " "
        joined += line
    return joined


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Terminal colour codes (``ESC[33m``) removed: Debian's fortune files colour their attributions."""
    return _ANSI.sub("", text)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:['\u2019-][A-Za-z]+)*")
# Code-like tokens: paths, calls, options, assignments, markup.
_CODE = re.compile(r"[{}<>|\\#@=_]|\(\)|::|->|--\w|\w/\w+/|^\s*[-*]\s")


def is_english_prose(sentence: str, min_words: int = 4) -> bool:
    """A sentence of English prose: at least ``min_words`` words, most tokens words of letters, little that
    looks like code, and not shouting (headings and menu paths in capitals)."""
    tokens = sentence.split()
    if len(tokens) < min_words or len(tokens) > 200:
        return False
    words = sum(bool(_LATIN_WORD.fullmatch(token.strip(".,;:!?\"'()[]"))) for token in tokens)
    if words < 0.7 * len(tokens) or len(_CODE.findall(sentence)) > 1:
        return False
    letters = [character for character in sentence if character.isalpha()]
    return bool(letters) and sum(character.isupper() for character in letters) < 0.5 * len(letters)


def is_chinese_prose(sentence: str, min_han: int = 6) -> bool:
    """A sentence of Chinese prose: at least ``min_han`` Han characters and at least half of its non-space
    characters Han or Chinese punctuation (so option tables and code with a Chinese word are dropped)."""
    characters = [character for character in sentence if not character.isspace()]
    han = len(_HAN.findall(sentence))
    if han < min_han or len(characters) > 400:
        return False
    chinese = han + sum("\u3000" <= character <= "\u303f" or "\uff00" <= character <= "\uffef"
                        for character in characters)
    return chinese >= 0.5 * len(characters)

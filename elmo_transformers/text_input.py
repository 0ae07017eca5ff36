"""The users' text, as every command reads it: UTF-8, no NUL characters, and lines of at most MAX_LINE_CHARS
characters.

UTF-16 or UTF-32 text without a byte-order mark decodes as UTF-8 whenever it is ASCII at heart, with a NUL
character after (or before) every letter: words full of NULs that would be embedded, counted and trained on
without a word of warning. Text holding NULs is refused, naming the encoding it most likely is; so is text that
does not decode as UTF-8 at all.

A line is read a piece at a time and refused once it passes MAX_LINE_CHARS (2**28, about 268 million characters,
268 MB of ASCII): a file without line breaks (`/dev/zero`, a binary file, a stream that never ends) would otherwise
be read whole into memory as one line.
"""

from .errors import DataError

CONVERT = "convert it to UTF-8, e.g. with `iconv -f ENCODING -t UTF-8`"
MAX_LINE_CHARS = 1 << 28  # the longest line read: a 200 MB line (docs/embedding-files.md) fits
PIECE_CHARS = 1 << 20  # a line is read (and checked for NULs) this many characters at a time


def likely_encoding(line):
    """A guess at the encoding of a line holding NULs, from where they fall among the characters."""
    sample = line[:4096]
    if not sample.strip("\x00"):
        return "binary data (NUL bytes only), not text"
    nul_share = sample.count("\x00") / max(len(sample), 1)
    if nul_share > 0.7:
        return "UTF-32 (without a byte-order mark)"
    if nul_share > 0.3:
        odd = sample[1::2].count("\x00")
        even = sample[0::2].count("\x00")
        return "UTF-16LE (without a byte-order mark)" if odd >= even else "UTF-16BE (without a byte-order mark)"
    return "binary data, not text"


def read_line(file, name, number):
    """The next line of the open text file `file` (with its line break; "" at the end), read a piece at a time, so
    that a line with NULs is refused after its first piece and a line without end after MAX_LINE_CHARS."""
    pieces, length = [], 0
    while True:
        piece = file.readline(PIECE_CHARS)
        if "\x00" in piece:
            raise DataError(
                f"{name}, line {number}: NUL characters in the text, so it is likely "
                f"{likely_encoding(piece)}; {CONVERT}"
            )
        pieces.append(piece)
        length += len(piece)
        if length - piece.endswith("\n") > MAX_LINE_CHARS:
            raise DataError(
                f"{name}, line {number}: longer than {MAX_LINE_CHARS:,} characters without a line break "
                "(the limit of a line): is it a text file, one sentence or paragraph a line?"
            )
        if len(piece) < PIECE_CHARS or piece.endswith("\n"):
            return "".join(pieces)


def checked_lines(file, name):
    """Yield the lines of the open text file `file` (UTF-8), raising a one-line DataError naming `name` and the
    line for a line with NUL characters, a line longer than MAX_LINE_CHARS, or bytes that are not UTF-8."""
    number = 0
    try:
        while line := read_line(file, name, number + 1):
            number += 1
            yield line
    except UnicodeDecodeError as e:
        bom = e.object[:2] in (b"\xff\xfe", b"\xfe\xff")
        guess = ", it starts with a UTF-16 byte-order mark" if bom and e.start < 2 else ""
        where = f" after line {number}" if number else ""
        raise DataError(f"{name}: not UTF-8 text (byte 0x{e.object[e.start]:02x}{where}{guess}); {CONVERT}") from None


def check_text_file(path):
    """Read the file `path` through `checked_lines` (UTF-8, no NULs, bounded lines): for a file that a library
    then reads whole (a vocabulary), so that its faults are one line naming the file and line."""
    with open(path, encoding="utf-8") as f:
        for _ in checked_lines(f, path):
            pass

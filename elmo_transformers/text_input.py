"""The users' text, as every command reads it: UTF-8, and no NUL characters.

UTF-16 or UTF-32 text without a byte-order mark decodes as UTF-8 whenever it is ASCII at heart, with a NUL
character after (or before) every letter: words full of NULs that would be embedded, counted and trained on
without a word of warning. Text holding NULs is refused, naming the encoding it most likely is; so is text that
does not decode as UTF-8 at all.
"""

from .errors import DataError

CONVERT = "convert it to UTF-8, e.g. with `iconv -f ENCODING -t UTF-8`"


def likely_encoding(line):
    """A guess at the encoding of a line holding NULs, from where they fall among the characters."""
    sample = line[:4096]
    nul_share = sample.count("\x00") / max(len(sample), 1)
    if nul_share > 0.7:
        return "UTF-32 (without a byte-order mark)"
    if nul_share > 0.3:
        odd = sample[1::2].count("\x00")
        even = sample[0::2].count("\x00")
        return "UTF-16LE (without a byte-order mark)" if odd >= even else "UTF-16BE (without a byte-order mark)"
    return "binary data, not text"


def checked_lines(lines, name):
    """Yield the lines of the open text file (or any iterable of str) `lines`, raising a one-line DataError
    naming `name` for a line with NUL characters or for bytes that are not UTF-8 (from a file opened as UTF-8)."""
    number = 0
    try:
        for number, line in enumerate(lines, 1):
            if "\x00" in line:
                raise DataError(f"{name}, line {number}: NUL characters in the text, so it is likely "
                                f"{likely_encoding(line)}; {CONVERT}")
            yield line
    except UnicodeDecodeError as e:
        bom = e.object[:2] in (b"\xff\xfe", b"\xfe\xff")
        guess = ", it starts with a UTF-16 byte-order mark" if bom and e.start < 2 else ""
        where = f" after line {number}" if number else ""
        raise DataError(f"{name}: not UTF-8 text (byte 0x{e.object[e.start]:02x}{where}{guess}); {CONVERT}") from None

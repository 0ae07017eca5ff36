"""The one rule every tool that writes follows before any work: its output never overlaps one of its inputs.

An output that is an input (also through a symbolic or hard link), contains one (a folder around it) or sits inside
one (a file or folder within an input folder) is refused with one line, so that a tool can never replace, fill or
delete what it reads. Inputs that do not exist on this machine (Hub repo ids, stdin "-") cannot overlap and are
skipped.
"""

import os


def check_output_apart(output, inputs, option="output", error=ValueError):
    """Raise `error` (the calling tool's one-line error type) naming the overlap if `output` is, contains or sits
    inside one of `inputs` (paths; None, "-" and paths that do not exist are skipped). `option` names the output
    in the message (e.g. "--output")."""
    out = os.path.realpath(output)
    for source in inputs:
        if source is None or not isinstance(source, (str, os.PathLike)) or source == "-" or not os.path.exists(source):
            continue
        src = os.path.realpath(source)
        same = out == src or (os.path.exists(out) and os.path.samefile(out, src))
        if same:
            relation = "is"
        elif os.path.commonpath([out, src]) == src:
            relation = "is inside"
        elif os.path.commonpath([out, src]) == out:
            relation = "contains"
        else:
            continue
        raise error(
            f"the {option} {output} {relation} the input {source}: a tool never writes over what it reads; "
            f"choose another {option}"
        )

"""ELMoForManyLangs' published archives (zip or tar), read before anything of them is kept: their members listed
(a zip's CRCs checked) and bounded, the model folder found in them, and only its files unpacked. The bounds, and what
a refused archive leaves: docs/coming-from-elmoformanylangs.md.
"""

import os
import shutil
from dataclasses import dataclass

from ..errors import ConversionError, first_line

EFML_MODEL_FILES = ("config.json", "token_embedder.pkl", "encoder.pkl", "word.dic")  # char.dic too where char_dim > 0

# What an archive may hold before anything is unpacked: a member (zip) or the whole (tar) expands to at most this many
# times its compressed size (published weights deflate to about 0.93 of their size, word lists to about 0.4), and
# what is unpacked, member by member and in all, must fit in the space free in the cache.
MAX_EXPANSION = 100


@dataclass(frozen=True)
class Member:
    """An archive member: its name, its size unpacked, its compressed size (None in a tar, compressed as a whole)
    and whether it is a regular file (not a folder, link or device)."""

    name: str
    size: int
    compressed: int | None
    is_file: bool
    is_dir: bool


def archive_members(path):
    """The `Member`s of the zip or tar archive `path`, every zip member's CRC checked; ConversionError for anything
    else."""
    import stat
    import tarfile
    import zipfile

    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
                if bad is not None:
                    raise ConversionError(f"{bad} is damaged in the archive")
                return [
                    Member(
                        i.filename,
                        i.file_size,
                        i.compress_size,
                        not i.is_dir() and not stat.S_ISLNK(i.external_attr >> 16),
                        i.is_dir(),
                    )
                    for i in archive.infolist()
                ]
        with tarfile.open(path) as archive:
            return [Member(m.name, m.size, None, m.isfile(), m.isdir()) for m in archive.getmembers()]
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise ConversionError(f"not a readable zip or tar archive ({first_line(e)})") from None


def check_archive(path, members):
    """ConversionError unless every member of archive `path` names a path inside it, once (a second member of one
    name would replace the first where the archive is unpacked: which file is the model's?), is a file or a folder,
    and expands at most MAX_EXPANSION times."""
    seen = set()
    for member in members:
        name = member.name.replace("\\", "/").strip("/").removeprefix("./")
        if name in seen:
            raise ConversionError(f"it holds two members named {member.name!r}: one of them is not the model's")
        seen.add(name)
        parts = member.name.replace("\\", "/").split("/")
        if member.name.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts:
            raise ConversionError(f"its member {member.name!r} names a path outside the archive")
        if not member.is_file and not member.is_dir:
            raise ConversionError(f"its member {member.name!r} is a link or a device, not a file")
        if member.compressed is not None and member.size > MAX_EXPANSION * max(member.compressed, 1):
            raise ConversionError(
                f"its member {member.name!r} expands {member.size / max(member.compressed, 1):,.0f} "
                f"times ({member.size:,} bytes), over the {MAX_EXPANSION} times a model file can"
            )
    total = sum(m.size for m in members)
    if total > MAX_EXPANSION * os.path.getsize(path):
        raise ConversionError(f"it expands to {total:,} bytes, over {MAX_EXPANSION} times its size")


def model_folder(names):
    """The folder inside an archive (listed by `names`) that holds an ELMoForManyLangs model: the top or one folder
    down; ConversionError naming what is missing otherwise."""
    names = {name.strip("/").removeprefix("./") for name in names}
    for folder in sorted({os.path.dirname(n) for n in names if os.path.basename(n) == "encoder.pkl"}, key=len):
        if folder.count("/") <= 1 and all(os.path.join(folder, f) in names for f in EFML_MODEL_FILES):
            return folder
    raise ConversionError(f"no ELMoForManyLangs model in it (a folder holding {', '.join(EFML_MODEL_FILES)})")


def model_members(members):
    """The members of the model folder (`model_folder`) inside an archive: the files a conversion reads."""
    folder = model_folder(m.name for m in members)
    return [m for m in members if m.is_file and os.path.dirname(m.name.strip("/").removeprefix("./")) == folder]


def unpack(archive, members, folder):
    """Write `members` (regular files of `archive`, one folder deep at most) into `folder` by their file names."""
    import tarfile
    import zipfile

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as f:
            for member in members:
                with f.open(member.name) as source, open(folder / os.path.basename(member.name), "xb") as target:
                    shutil.copyfileobj(source, target)
        return
    with tarfile.open(archive) as f:
        for member in members:
            with f.extractfile(member.name) as source, open(folder / os.path.basename(member.name), "xb") as target:
                shutil.copyfileobj(source, target)

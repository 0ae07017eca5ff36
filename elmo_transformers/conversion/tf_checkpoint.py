"""Read a TensorFlow checkpoint (the V2 "tensor bundle" format) with NumPy alone: no TensorFlow needed.

A checkpoint PREFIX is two kinds of files:

- `PREFIX.index`: a LevelDB table (SSTable), uncompressed. The file ends with a 48-byte footer (two block handles,
  metaindex and index, each a pair of varints offset, size; zero padding; the magic 0xdb4775248b80fb57 little-endian).
  The index block lists the data blocks; every block is a run of prefix-compressed entries (varints shared,
  unshared, value length; the key's unshared bytes; the value) ending with its restart array, and is followed by a
  one-byte compression type (0 = none) and a masked crc32c. Keys are tensor names, in order; the empty key holds the
  `BundleHeaderProto` (num_shards, endianness), every other value a `BundleEntryProto`: dtype (field 1), shape
  (2: TensorShapeProto, its dims field 2 with size in field 1), shard_id (3), offset (4), size (5), crc32c (6, fixed32,
  masked), slices (7: a partitioned variable, not supported here).
- `PREFIX.data-SSSSS-of-NNNNN`: the shards, each tensor's raw bytes (little-endian, row-major) at its offset.

Masked crc32c (LevelDB's rule): rotate the CRC-32C right by 15 bits and add 0xa282ead8. Every tensor read is checked
against it, so a truncated or damaged shard is an error, never a wrong model.

Nothing the index says is trusted before it is checked: the index is read only up to `MAX_INDEX_BYTES`, and a tensor
is read only once its dtype is the one the caller needs, its shape has at most `MAX_RANK` dimensions of known size,
its size is its shape's and it lies within its shard, so that a corrupt or hostile index costs no memory.
"""

import math
import os
import struct

import google_crc32c
import numpy as np

from ..errors import ConversionError

TABLE_MAGIC = 0xDB4775248B80FB57
MAX_INDEX_BYTES = 64 << 20  # an ELMo checkpoint's index is a few kilobytes, a large model's with optimizer slots ~1 MB
MAX_RANK = 32  # NumPy 1.x's limit; ELMo's variables have at most 4 dimensions
DTYPES = {
    1: ("DT_FLOAT", np.float32),
    2: ("DT_DOUBLE", np.float64),
    3: ("DT_INT32", np.int32),
    4: ("DT_UINT8", np.uint8),
    5: ("DT_INT16", np.int16),
    6: ("DT_INT8", np.int8),
    9: ("DT_INT64", np.int64),
    10: ("DT_BOOL", np.bool_),
    17: ("DT_UINT16", np.uint16),
    19: ("DT_HALF", np.float16),
    22: ("DT_UINT32", np.uint32),
    23: ("DT_UINT64", np.uint64),
}  # TensorFlow's DataType enum: those of fixed size


def dtype_name(code):
    return DTYPES[code][0] if code in DTYPES else f"DataType {code}"


def crc32c(data):
    """CRC-32C (Castagnoli) of `data` (bytes): google-crc32c's, in C where its wheel has it."""
    return google_crc32c.value(data)


def unmask(masked):
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def _varint(buffer, position):
    result = shift = 0
    while True:
        if position >= len(buffer) or shift > 63:
            raise ValueError("a varint runs past its record")
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _fields(message):
    """The (field number, value) pairs of a protocol-buffer message: ints for varints and fixed32/64, bytes for
    length-delimited fields."""
    position = 0
    while position < len(message):
        key, position = _varint(message, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(message, position)
        elif wire == 1:
            value, position = struct.unpack_from("<Q", message, position)[0], position + 8
        elif wire == 2:
            size, position = _varint(message, position)
            value, position = bytes(message[position : position + size]), position + size
        elif wire == 5:
            value, position = struct.unpack_from("<I", message, position)[0], position + 4
        else:
            raise ValueError(f"unsupported protocol-buffer wire type {wire}")
        if position > len(message):
            raise ValueError("a protocol-buffer field runs past its record")
        yield number, value


def _block(table, offset, size):
    """The (key, value) entries of one table block, its trailer's crc32c checked."""
    if offset + size + 5 > len(table):
        raise ValueError("a table block runs past the end of the file")
    contents = table[offset : offset + size]
    compression, stored = table[offset + size], struct.unpack_from("<I", table, offset + size + 1)[0]
    if compression != 0:
        raise ValueError(f"compressed table block (type {compression}); TensorFlow writes them uncompressed")
    if unmask(stored) != crc32c(table[offset : offset + size + 1]):
        raise ValueError("a table block fails its checksum")
    n_restarts = struct.unpack_from("<I", contents, len(contents) - 4)[0]
    end = len(contents) - 4 * (n_restarts + 1)
    position, key = 0, b""
    while position < end:
        shared, position = _varint(contents, position)
        unshared, position = _varint(contents, position)
        value_size, position = _varint(contents, position)
        key = key[:shared] + bytes(contents[position : position + unshared])
        position += unshared
        yield key, bytes(contents[position : position + value_size])
        position += value_size


def _table(table):
    """The (key, value) records of a LevelDB table (the bytes of a checkpoint index)."""
    if len(table) < 48 or struct.unpack_from("<Q", table, len(table) - 8)[0] != TABLE_MAGIC:
        raise ValueError("not a TensorFlow checkpoint index (no table footer)")
    footer = table[-48:]
    _, position = _varint(footer, 0)  # the metaindex handle (unused)
    _, position = _varint(footer, position)
    index_offset, position = _varint(footer, position)
    index_size, _ = _varint(footer, position)
    for _, handle in _block(table, index_offset, index_size):
        offset, position = _varint(handle, 0)
        size, _ = _varint(handle, position)
        yield from _block(table, offset, size)


def _int64(value):
    """A varint read as the int64 it encodes (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


class TensorEntry:
    """Where one tensor lies: dtype, shape, shard, offset, size and masked crc32c (a `BundleEntryProto`)."""

    def __init__(self, record):
        self.dtype, self.shape, self.shard, self.offset, self.size, self.crc32c = 0, (), 0, 0, 0, 0
        self.sliced = False
        for number, value in _fields(record):
            if number == 1:
                self.dtype = value
            elif number == 2:  # dims are int64: -1 is "unknown"
                self.shape = tuple(_int64(dict(_fields(dim)).get(1, 0)) for n, dim in _fields(value) if n == 2)
            elif number == 3:
                self.shard = value
            elif number == 4:
                self.offset = value
            elif number == 5:
                self.size = value
            elif number == 6:
                self.crc32c = value
            elif number == 7:
                self.sliced = True


def open_file(path):
    return open(path, "rb")


class Checkpoint:
    """A checkpoint prefix: `shapes` (name -> shape) of every tensor, `read(names, dtype)` -> checked NumPy arrays.

    `open_shard(path)` opens a shard as a binary file that can seek (a file by default, an archive's member when the
    checkpoint is read from a TF-Hub .tar.gz)."""

    def __init__(self, prefix, open_shard=open_file):
        self.prefix, self.open_shard, self.shard_lengths = str(prefix), open_shard, {}
        self.index = index = f"{self.prefix}.index"
        try:
            with open(index, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                table = f.read(size + 1) if size <= MAX_INDEX_BYTES else b""  # read(n) allocates n bytes first
        except OSError as e:
            raise ConversionError(f"cannot read the checkpoint index {index}: {e.strerror or e}") from e
        size = max(size, len(table))  # a file that grew meanwhile
        if size > MAX_INDEX_BYTES:
            raise ConversionError(
                f"{index} is {size:,} bytes, more than a checkpoint index is read "
                f"({MAX_INDEX_BYTES:,} at most; an ELMo checkpoint's is a few kilobytes): not a "
                "TensorFlow checkpoint index"
            )
        try:
            records = dict(_table(table))
            header = dict(_fields(records.pop(b"", b"")))
            self.entries = {key.decode("utf-8"): TensorEntry(value) for key, value in records.items()}
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise ConversionError(
                f"{index} is not a readable TensorFlow checkpoint index (truncated or corrupt?): {e}"
            ) from e
        if header.get(2, 0) != 0:
            raise ConversionError(f"{index} was written big-endian; only little-endian checkpoints are supported")
        self.num_shards = header.get(1, 1)
        self.shapes = {name: entry.shape for name, entry in self.entries.items()}

    def shard_path(self, shard):
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _shard_length(self, path):
        if path not in self.shard_lengths:
            try:
                with self.open_shard(path) as f:
                    self.shard_lengths[path] = f.seek(0, os.SEEK_END)
            except OSError as e:
                raise ConversionError(f"cannot read the checkpoint shard {path}: {e.strerror or e}") from e
        return self.shard_lengths[path]

    def check(self, name, dtype):
        """ConversionError, before a byte of it is read, unless tensor `name` is of `dtype` (a NumPy type) and its
        index entry is consistent: a known shape, the size of that shape, bytes that lie within its shard."""
        entry, code = self.entries[name], next(code for code, (_, numpy) in DTYPES.items() if numpy == dtype)
        if entry.sliced:
            raise ConversionError(
                f"{self.index}: {name} is a partitioned variable (saved in slices), which is not "
                "supported: save it unpartitioned"
            )
        if entry.dtype != code:
            raise ConversionError(
                f"{self.index}: {name} is declared {dtype_name(entry.dtype)}, but it must be "
                f"{dtype_name(code)}: a corrupt index, or not an ELMo checkpoint"
            )
        if len(entry.shape) > MAX_RANK:
            raise ConversionError(
                f"{self.index}: {name} declares {len(entry.shape):,} dimensions (at most {MAX_RANK}): a corrupt index"
            )
        if any(dim < 0 for dim in entry.shape):
            raise ConversionError(
                f"{self.index}: {name} declares the shape {entry.shape}, with a dimension of "
                "unknown size: a corrupt index (a checkpoint stores tensors of known shape)"
            )
        size = math.prod(entry.shape) * np.dtype(dtype).itemsize
        if entry.size != size:
            raise ConversionError(
                f"{self.index}: {name} declares {entry.size:,} bytes, but its shape {entry.shape} "
                f"of {dtype_name(code)} is {size:,} bytes: a corrupt index"
            )
        if entry.shard >= self.num_shards:
            raise ConversionError(
                f"{self.index}: {name} is in shard {entry.shard} of a checkpoint of {self.num_shards}: a corrupt index"
            )
        path = self.shard_path(entry.shard)
        length = self._shard_length(path)
        if entry.offset + entry.size > length:
            raise ConversionError(
                f"{path} holds {length:,} bytes, but {name} lies at bytes {entry.offset:,} to "
                f"{entry.offset + entry.size:,} of it: a truncated shard or a corrupt index"
            )

    def read(self, names, dtype):
        """name -> array of each of `names`, all checked (`check`) before any is read, then read in the order they
        lie in the shards (so that a shard inside a compressed archive is read in one pass)."""
        for name in names:
            self.check(name, dtype)
        arrays = {}
        for name in sorted(names, key=lambda name: (self.entries[name].shard, self.entries[name].offset)):
            entry, path = self.entries[name], self.shard_path(self.entries[name].shard)
            try:
                with self.open_shard(path) as f:
                    f.seek(entry.offset)
                    data = f.read(entry.size)
            except OSError as e:
                raise ConversionError(f"cannot read the checkpoint shard {path}: {e.strerror or e}") from e
            if len(data) != entry.size:  # checked against its length: the file changed while being read
                raise ConversionError(
                    f"{path} ends at byte {entry.offset + len(data):,}, inside {name} (truncated shard?)"
                )
            if crc32c(data) != unmask(entry.crc32c):
                raise ConversionError(f"{name} in {path} fails its crc32c check (corrupt or truncated shard)")
            arrays[name] = np.frombuffer(data, np.dtype(dtype).newbyteorder("<")).reshape(entry.shape)
        return arrays


def checkpoint_prefix(path):
    """The checkpoint prefix that `path` names: a prefix itself, or a folder holding one (as its `checkpoint` file
    names it, by base name since the paths there are the training machine's), or ConversionError."""
    path = os.fspath(path)
    if os.path.isfile(f"{path}.index"):
        return path
    if not os.path.isdir(path):
        raise ConversionError(f"{path} is neither a folder nor a checkpoint prefix (no {path}.index)")
    state = os.path.join(path, "checkpoint")
    if os.path.isfile(state):
        with open(state, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model_checkpoint_path":
                    candidate = os.path.join(path, os.path.basename(value.strip().strip('"')))
                    if os.path.isfile(f"{candidate}.index"):
                        return candidate
                    raise ConversionError(
                        f"{state} names the checkpoint {value.strip()}, but {candidate}.index "
                        "is not in the folder: pass the checkpoint prefix itself"
                    )
    indexes = sorted(name[: -len(".index")] for name in os.listdir(path) if name.endswith(".index"))
    if len(indexes) == 1:
        return os.path.join(path, indexes[0])
    if not indexes:
        raise ConversionError(
            f"{path} holds no TensorFlow checkpoint (no checkpoint file, no *.index): pass a "
            "bilm-tf training folder, a TF-Hub module folder or a checkpoint prefix"
        )
    raise ConversionError(
        f"{path} holds several checkpoints ({', '.join(indexes)}) and no checkpoint file saying "
        "which: pass the checkpoint prefix itself"
    )

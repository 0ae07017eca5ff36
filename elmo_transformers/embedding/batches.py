"""The batches `embed_file` feeds the model: which lines go together (`Plan`, each batch handed over as the input is
read; their `input_ids` are the tokenizer's, `ElmoBasicTokenizer.encode`: one NumPy gather from the rows it keeps, each
word's made once), and a thread that prepares the next batches while the model runs (`in_background`), and the
thread that writes finished batches beside it (`Writer`)."""

import array
import bisect
import queue
import threading
from dataclasses import dataclass

import numpy as np


@dataclass(eq=False)
class Batch:
    """Lines embedded together: their numbers (`lines`, int64, shortest first), texts and words (`counts`)."""

    lines: np.ndarray
    texts: list
    counts: np.ndarray

    @property
    def key(self):
        return int(self.lines[0])  # (its first line: what names its Parquet file and its journal entry)


@dataclass
class LongLine:
    """A line longer than max_words, embedded alone in stateful windows."""

    line: int
    text: str
    words: int

    @property
    def key(self):
        return self.line

    @property
    def lines(self):
        return np.array([self.line], np.int64)

    @property
    def counts(self):
        return np.array([self.words], np.int64)


class Plan:
    """Which lines go together, the same on every process and every run: the lines of at most `max_words` words
    sorted by length (little padding; lines of one length in their order), cut into batches of `batch_size` lines,
    or (batch_size None) of as many lines as keep the padded batch (lines x the longest line's words) within
    `batch_words`; each longer line on its own (a `LongLine`).

    The cuts are made from `histogram` ({words: lines}, `inputs.Scan`) alone, so that `units` can hand over each
    batch as soon as its last line is read: a run holds the text of the batches not yet complete (at most one a
    length), never the whole input."""

    def __init__(self, histogram, batch_size, max_words, batch_words):
        self.max_words, self.histogram = max_words, histogram
        self.first = {}  # words -> the sorted position of the first line of that many words
        self.cuts = array.array("q")  # the sorted position of each batch's first line
        position = size = 0  # (size: lines in the batch being cut)
        for words in sorted(w for w in histogram if w <= max_words and histogram[w]):
            self.first[words] = position
            left = histogram[words]
            # A batch takes lines while lines x their words (the longest: ascending) fit the budget, one at least.
            room = batch_size if batch_size is not None else max(batch_words // max(words, 1), 1)
            while left:
                if size >= room or not len(self.cuts):
                    self.cuts.append(position)
                    size = 0
                taken = min(left, room - size)
                size, position, left = size + taken, position + taken, left - taken
        self.short = position  # lines of at most max_words words

    def __len__(self):
        """How many batches."""
        return len(self.cuts)

    def batch_size(self, k):
        return (self.cuts[k + 1] if k + 1 < len(self.cuts) else self.short) - self.cuts[k]

    def units(self, lines, changed):
        """The batches and long lines of `lines` ((number, text, words) of each line in order, `Input.counted`), each
        once its last line is read; `changed()`: the error for lines that are not those the histogram counted."""
        seen = dict.fromkeys(self.first, 0)  # words -> lines of that many words read so far
        filling = {}  # batch -> [(sorted position, number, text, words)] of its lines read so far
        for number, text, words in lines:
            if words > self.max_words:
                yield LongLine(number, text, words)
                continue
            if seen.get(words, 0) >= self.histogram.get(words, 0):  # (more lines of this length than counted)
                raise changed()
            position = self.first[words] + seen[words]
            seen[words] += 1
            k = bisect.bisect_right(self.cuts, position) - 1
            members = filling.setdefault(k, [])
            members.append((position, number, text, words))
            if len(members) == self.batch_size(k):
                del filling[k]
                members.sort()
                _, numbers, texts, counts = zip(*members)
                yield Batch(np.array(numbers, np.int64), list(texts), np.array(counts, np.int64))
        if filling:
            raise changed()


class in_background:
    """Iterate over `items` in a thread, `depth` items ahead of the consumer; an error there is raised here, and
    closing (or leaving the `with` block) stops the thread."""

    def __init__(self, items, depth=2):
        self.queue = queue.Queue(depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(items,), daemon=True)
        self.thread.start()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def _produce(self, items):
        try:
            for item in items:
                if not self._put((True, item)):
                    return
            self._put((False, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            self._put((False, e))

    def __iter__(self):
        while True:
            more, item = self.queue.get()
            if not more:
                if item is not None:
                    raise item
                return
            yield item

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


class Writer:
    """A thread that stores what `put` hands it with `write(item)`, while the model computes the next batch; an
    error there (a full disk) is raised by the next `put` or on leaving the `with` block, which first waits for
    every item handed over."""

    def __init__(self, write, depth=2):
        self.write = write
        self.queue = queue.Queue(depth)
        self.error, self.failed = None, False  # failed: nothing more is written once a write failed
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while (item := self.queue.get()) is not None:
            if not self.failed:
                try:
                    self.write(item)
                except BaseException as e:  # noqa: BLE001 - raised in the thread that hands the work over
                    self.error, self.failed = e, True

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def put(self, item):
        self._raise()
        self.queue.put(item)

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        self.queue.put(None)
        self.thread.join()
        if kind is None:
            self._raise()

"""The batches `embed_file` feeds the model: which lines go together (`work_units`; their `input_ids` are the
tokenizer's, `ElmoBasicTokenizer.encode`: one NumPy gather from the rows it keeps, each word's made once), and a
thread that prepares the next batches while the model runs (`in_background`), and the thread that writes finished
batches beside it (`Writer`)."""

import queue
import threading

import numpy as np


def work_units(counts, batch_size, max_words, batch_words):
    """The same list on every process and every run: batches of line numbers sorted by length (little padding),
    each of `batch_size` lines, or (batch_size None) of as many lines as keep the padded batch (lines x the longest
    line's words) within `batch_words`; then each line longer than `max_words` on its own (an int). `counts`: the
    words of each line. A batch is an int64 array, a view of one array of all line numbers (8 bytes a line)."""
    counts = np.asarray(counts, np.int64)
    order = np.argsort(counts, kind="stable")  # (as `sorted`: lines of one length in their order)
    long = counts[order] > max_words
    short = order[~long]
    if batch_size is not None:
        cuts = range(batch_size, len(short), batch_size)
    else:
        cuts, size = [], 0
        for k, words in enumerate(counts[short].tolist()):  # ascending: the line added is the batch's longest
            if size and (size + 1) * max(words, 1) > batch_words:
                cuts.append(k)
                size = 0
            size += 1
    return [*np.split(short, cuts), *order[long].tolist()] if len(short) else order[long].tolist()


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

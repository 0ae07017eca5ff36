"""The `elmo-transformers` console command (also `python -m elmo_transformers`). `elmo_transformers` is a lazy
package (importing it loads neither torch nor transformers), so a command parses its arguments, and answers --help
and usage errors, before anything heavy loads."""


def main(argv=None):
    from elmo_transformers.cli import main as run

    return run(argv)

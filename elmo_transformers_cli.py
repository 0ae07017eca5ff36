"""The `elmo-transformers` console command. It lives outside the `elmo_transformers` package on purpose.

Importing `elmo_transformers` registers ELMo with the transformers Auto classes, and that loads torch and
transformers, which takes seconds. A command parses its arguments first, so that --help and usage errors answer at
once. This entry point therefore puts the package into `sys.modules` with its `__init__` not yet run. The
command's module (`elmo_transformers.cli.COMMAND`) parses the arguments and then calls
`elmo_transformers.cli.import_package()`, which runs the `__init__` before any work. `python -m elmo_transformers`
and library code import the package the ordinary way.
"""

import importlib.util
import sys

PACKAGE = "elmo_transformers"


def main(argv=None):
    if PACKAGE not in sys.modules:
        spec = importlib.util.find_spec(PACKAGE)
        package = importlib.util.module_from_spec(spec)
        package._init_deferred = True  # elmo_transformers.cli.import_package runs the __init__ and removes this
        sys.modules[PACKAGE] = package
    from elmo_transformers.cli import main as run

    return run(argv)

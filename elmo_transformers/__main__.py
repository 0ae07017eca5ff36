"""`python -m elmo_transformers ...`: the `elmo-transformers` command (works under `torchrun -m` and
`accelerate launch -m`)."""

import sys

from .cli import main

sys.exit(main())

"""`python -m service`: run the gRPC server (see `--help`)."""

import sys

from .serving.server import main

sys.exit(main())

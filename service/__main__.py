"""`python -m service`: run the gRPC server (see `--help`)."""

import sys

from .server import main

sys.exit(main())

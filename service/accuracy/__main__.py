"""`python -m service.accuracy`: the accuracy table (`make accuracy`; see `--help`)."""

from .run import main

raise SystemExit(main())

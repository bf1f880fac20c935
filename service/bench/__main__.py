"""`python -m service.bench`: the benchmark (`make bench`; see `--help`)."""

from .run import main

raise SystemExit(main())

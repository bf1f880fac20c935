"""The offer data pipeline, above the rules loader: the importers from SkyPilot and gpuhunt (`importers/`), the
rows a rules version will not place (`dropped`), and `refresh`. The offer tables' reader and checks and the
accelerator map live in `rulebook/` (the loader needs them; this package imports down)."""

"""The offer data pipeline: offer tables (`offer_files`, `offer_checks`), provider accelerator names
(`accelerators`), the importers from SkyPilot and gpuhunt (`importers/`), and `refresh`."""

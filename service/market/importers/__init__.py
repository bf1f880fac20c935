"""Importers that turn public price catalogs (SkyPilot, dstack gpuhunt) into `rules/offers/*.csv` rows."""

"""Moved to `rulebook/accelerators.py` (issue 34 item 10: the rules loader reads the accelerator map, and
`market/` sits above it and imports down). Kept as a name so code written against the old place still imports."""

from ..rulebook.accelerators import (
    MAP_COLUMNS,
    MEMORY_TOLERANCE,
    AcceleratorMap,
    AcceleratorRule,
    read_accelerator_map,
)

__all__ = ["MAP_COLUMNS", "MEMORY_TOLERANCE", "AcceleratorMap", "AcceleratorRule", "read_accelerator_map"]

"""`make accuracy` (`python -m service.accuracy`): the product's estimates against measured datasets
(calibration/), per estimate and per class, and the results file the answers cite (rules/accuracy/results.yaml).

Imports everything below it (decide's sizing to compare at a measured width, rulebook to load and answer), like
bench, and nothing above; nothing imports it."""

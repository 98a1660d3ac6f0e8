"""Privacy arithmetic and values: exact numbers, privacy losses, neighbour relations,
measurements and composition. Standard library (+ numpy) only; imports nothing of ours."""

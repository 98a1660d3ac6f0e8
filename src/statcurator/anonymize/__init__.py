"""Anonymization: hierarchies, privacy criteria, lattice search, Mondrian, utility metrics."""

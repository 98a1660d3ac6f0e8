"""Exact samplers over a secure RNG, and the noise mechanisms built on them."""

"""Regression tests of the adversarial privacy review of the DP path: each test demonstrates a
way an analyst could learn more than the declared ε/δ (or be charged wrongly) and keeps the
fix in place."""

"""Scoring: packs, tickets, the one prompt builder, the engine, readouts, debiasing, calibration, the stable-prefix
cache, the result schema."""

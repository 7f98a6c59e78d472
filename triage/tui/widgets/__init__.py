"""Widgets, one per file where they have behaviour, named after what they show."""

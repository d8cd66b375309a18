"""Renderers: each reads records and writes one view of them."""

"""Acme SQL: a stand-in for a vendor's text-to-SQL system (see ../README.md)."""

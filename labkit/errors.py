"""The one base class under every error labkit raises, so a caller can catch the kit's errors in one clause.

Each error also keeps the standard base that says what kind of failure it is (a damaged pack is
also a ``ValueError``, an unwritable folder also an ``OSError``), and its message names the
file or sample and the fix.
"""

from __future__ import annotations


class LabkitError(Exception):
    """Base of every error labkit raises."""

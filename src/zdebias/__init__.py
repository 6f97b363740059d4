"""zdebias: find, remove, and prove the removal of dataset shortcuts in NLI and text
classification."""

from zdebias.data.schema import Record

__version__ = "0.1.0"
__all__ = ["Record", "__version__"]

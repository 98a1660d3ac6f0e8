"""The exception types of statcurator.

Every error says what is wrong *and* what to do about it. Each layer raises the most
specific type below; callers that do not care catch :class:`StatcuratorError`.

>>> try:
...     raise MetadataError("column 'income' has no declared bounds",
...                         remedy="add bounds = [0, 200000] to its metadata")
... except StatcuratorError as e:
...     print(e)
column 'income' has no declared bounds; add bounds = [0, 200000] to its metadata
"""

from __future__ import annotations

__all__ = [
    "StatcuratorError",
    "InvalidParameterError",
    "MetadataError",
    "HierarchyError",
    "DataError",
    "UnsatisfiableError",
    "VerificationError",
    "UnsupportedQueryError",
    "BudgetExceededError",
    "LedgerError",
    "EngineError",
    "PrivacyAccountingError",
    "PrivacyWarning",
]


class StatcuratorError(Exception):
    """Base class of every error statcurator raises on purpose.

    ``remedy`` (optional) is appended to the message after a semicolon, so that the text
    always reads "problem; what to do".
    """

    def __init__(self, message: str, *, remedy: str | None = None) -> None:
        self.problem = message
        self.remedy = remedy
        super().__init__(f"{message}; {remedy}" if remedy else message)


class InvalidParameterError(StatcuratorError, ValueError):
    """A parameter (ε, δ, k, a bound, ...) is malformed, out of range or absurd."""


class MetadataError(StatcuratorError, ValueError):
    """Dataset metadata is missing, malformed, or inconsistent with the data."""


class HierarchyError(MetadataError):
    """A generalization hierarchy is malformed or does not cover a value."""


class DataError(StatcuratorError, ValueError):
    """The data itself cannot be used as given (a value outside its hierarchy, a bad type)."""


class UnsatisfiableError(InvalidParameterError):
    """A privacy criterion can never hold on this data (e.g. l above the number of values)."""


class VerificationError(StatcuratorError):
    """An independent re-check of a release failed; the release was not written."""


class UnsupportedQueryError(StatcuratorError, ValueError):
    """A query is outside the supported subset, or its sensitivity cannot be bounded."""


class BudgetExceededError(StatcuratorError):
    """A charge would exceed the privacy budget; nothing was spent and nothing released."""


class LedgerError(StatcuratorError):
    """The privacy ledger cannot be read or written."""


class EngineError(StatcuratorError):
    """The relational engine failed to run a compiled plan."""


class PrivacyAccountingError(StatcuratorError):
    """The cost about to be charged is not the one the query's measurement states (a defect
    caught before anything is charged or released)."""


class PrivacyWarning(UserWarning):
    """Something is allowed but weakens privacy (e.g. a test-only seeded RNG is in use)."""

"""The one error tree of advisor.

    AdvisorError                      exit 1 unless a subclass says otherwise
    ├── StoreError                    the event store cannot be opened, read or written
    │   ├── IntegrityError            the hash chain does not verify (exit 3)
    │   └── InvalidEventError         an event failed validation before reaching the table
    ├── InputError                    an input file or stream is unusable (exit 4)
    │   └── MalformedInputError       --strict and a line could not be parsed
    └── PrerequisiteError             something the command needs is missing (exit 2)
        └── GpuUnavailableError       no NVML library, no driver, or no GPU

Library code raises these (wrapping third-party errors with ``raise ... from e``);
only the CLI turns them into a one-line ``Error: ...`` and an exit code.
"""

from __future__ import annotations


class AdvisorError(Exception):
    exit_code = 1


class StoreError(AdvisorError):
    pass


class IntegrityError(StoreError):
    exit_code = 3

    def __init__(self, message: str, first_bad_seq: int | None = None) -> None:
        super().__init__(message)
        self.first_bad_seq = first_bad_seq


class InvalidEventError(StoreError):
    pass


class InputError(AdvisorError):
    exit_code = 4


class MalformedInputError(InputError):
    def __init__(self, message: str, line_no: int | None = None) -> None:
        super().__init__(message)
        self.line_no = line_no


class PrerequisiteError(AdvisorError):
    exit_code = 2


class GpuUnavailableError(PrerequisiteError):
    pass

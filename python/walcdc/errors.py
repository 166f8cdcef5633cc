"""Exceptions raised by walcdc. Every one names the volume (``file``) and, where one applies,
the log address (``lsa``, order-preserving u64; ``lsa_text`` as ``pageid|offset``).

Every error a caller can cause is a :class:`LogError`. Its message names the fix in the caller's
own terms: keyword arguments for the Python API (``str(exc)``), command-line flags for the CLI
(:meth:`LogError.cli_text`).
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "LogError",
    "LogIOError",
    "BadHeaderError",
    "MismatchedLogSetError",
    "ChecksumError",
    "TruncatedLogError",
    "MissingArchiveError",
    "EncryptedPageError",
    "CorruptRecordError",
    "NoSupplementalLogError",
    "InvalidArgumentError",
    "OutputError",
    "argument_error",
]

#: Keyword arguments of the Python API and the CLI flags that set them, for messages that name
#: what to change.
CLI_FLAGS = {
    "start": "--from",
    "end": "--to",
    "tables": "--tables",
    "exclude_tables": "--exclude-tables",
    "users": "--users",
    "ops": "--ops",
    "mode": "--mode",
    "cursor": "--cursor",
    "on_encrypted": "--on-encrypted",
    "on_partial": "--on-partial",
    "on_error": "--on-error",
    "include_ddl": "--include-ddl",
    "keys": "--keys",
    "envelope": "--envelope",
    "format": "--format",
    "schema": "--schema",
    "redact": "--no-redact",
    "committed_only": "--engine",
    "output": "--output",
    "table": "--table",
    "state": "state",
}


class LogError(Exception):
    """Base class of every error about reading a CUBRID log set (and of every error a caller's
    arguments can cause)."""

    #: A hint appended to the message: (Python form, CLI form).
    hint: Optional[tuple] = None

    def __init__(
        self,
        message: str,
        file: Optional[str] = None,
        lsa: Optional[int] = None,
        *,
        cli_message: Optional[str] = None,
    ):
        self.message = message
        self.file = file
        self.lsa = lsa
        self._cli_message = cli_message
        super().__init__(self._with_hint(message, 0))

    def _with_hint(self, text: str, form: int) -> str:
        return f"{text} ({self.hint[form]})" if self.hint else text

    def cli_text(self) -> str:
        """The message in command-line terms (flags instead of keyword arguments)."""
        return self._with_hint(self._cli_message or self.message, 1)

    @property
    def lsa_text(self) -> Optional[str]:
        if self.lsa is None:
            return None
        from walcdc._native import lsa_text  # the core's text (walcdc.lsa depends on this module)

        return lsa_text(self.lsa)


class LogIOError(LogError, OSError):
    """A volume, cursor or schema file could not be opened, listed or mapped."""


class BadHeaderError(LogError):
    """Not a CUBRID log volume (wrong magic, bad header page, impossible page size)."""


class MismatchedLogSetError(LogError):
    """Volumes that do not belong together (another database, overlapping or duplicate archives)."""


class ChecksumError(LogError):
    """A page whose stored checksum does not match its contents."""


class TruncatedLogError(LogError):
    """A volume shorter than its header says, or a record cut off by the end of the files."""


class MissingArchiveError(LogError):
    """A page that only an archive volume can hold, and that archive is not in the set."""


class EncryptedPageError(LogError):
    """A TDE-encrypted page had to be read; pass ``on_encrypted="skip"`` to skip such pages."""

    hint = (
        'pass on_encrypted="skip" to skip encrypted pages',
        "use --on-encrypted skip to skip encrypted pages",
    )


class CorruptRecordError(LogError):
    """A record (or page) that cannot be what CUBRID wrote (type, links, lengths or layout)."""


class NoSupplementalLogError(LogError):
    """The log holds no supplemental records (the server ran with ``supplemental_log=0``), so
    change events cannot be produced; set ``supplemental_log=1`` in cubrid.conf."""


class InvalidArgumentError(LogError, ValueError):
    """An argument that does not fit the log (an LSA outside it, an unknown option, an unknown
    table)."""


class OutputError(LogError, OSError):
    """An output that cannot be written as asked (it exists and would be overwritten, its
    directory is missing, its format is unknown)."""


def argument_error(argument: str, text: str, cls=InvalidArgumentError) -> LogError:
    """An error about one argument; ``{}`` in ``text`` stands for its name, rendered as
    ``argument=`` for Python callers and as the flag for the CLI."""
    flag = CLI_FLAGS.get(argument, "--" + argument.replace("_", "-"))
    return cls(text.format(f"{argument}="), cli_message=text.format(flag))

"""The exceptions that reach users as a message instead of a traceback."""


class UserError(Exception):
    """Bad input or an impossible configuration.

    The CLI prints ``ahasd: error: <message>`` and exits with status 2. The message names
    the file, record and field (or the option) at fault, on one line.
    """


class UsageError(UserError):
    """A command line that does not parse (unknown option, bad or out-of-range value).

    The message is complete as it is (``ahasd simulate: --tokens: ... (see ahasd simulate
    --help)``): the CLI prints it unchanged and exits with status 2.
    """

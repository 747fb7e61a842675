"""The one exception type that reaches users as a message instead of a traceback."""


class UserError(Exception):
    """Bad input or an impossible configuration.

    The CLI prints ``ahasd: error: <message>`` and exits with status 2. The message names
    the file, record and field (or the option) at fault.
    """

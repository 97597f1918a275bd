"""The one exception type that the command line turns into a one-line message and exit code 2."""


class DynallocError(Exception):
    """Bad input or an unusable environment: the message names the key, file or value at fault."""

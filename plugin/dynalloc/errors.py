"""The one exception type that the command line turns into a one-line message and exit code 2."""


class DynallocError(Exception):
    """Bad input or an unusable environment: the message names the key, file or value at fault."""


class SharedError(DynallocError):
    """Raised by every rank at the same point, from numbers they all share (a diverging loss):
    the ranks can stop together, with no need to abort the job."""

"""A prerequisite of a check or of the simulation is missing: a failure in CI, a skip with the reason elsewhere."""


class Unavailable(RuntimeError):
    """A prerequisite is missing (a tool not built, a module not downloaded, nothing rendered). The tests turn it
    into a failure when CI is set and a skip with the reason elsewhere (tests/conftest.py); make demo prints it."""


def unavailable(reason):
    raise Unavailable(reason)

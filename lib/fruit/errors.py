"""The one exception type that the command line turns into a one-line error."""


class FruitError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name.

    The message must say what was wrong and, where there is a fixed set of valid
    choices, list them. ``fruit`` prints it as ``fruit: error: <message>`` and exits
    with status 2, without a traceback.
    """


def unknown_choice(kind: str, value: str, choices) -> FruitError:
    """Build the standard "unknown X 'v'; valid choices: a, b, c" error."""
    listed = ", ".join(sorted(choices))
    return FruitError(f"unknown {kind} {value!r}; valid choices: {listed}")

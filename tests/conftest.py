"""The suite runs the same from a terminal and from a background job. A shell that starts a
job in the background without job control sets it to ignore SIGINT, and an ignored SIGINT is
inherited: Python then installs no KeyboardInterrupt handler, in this process or in the commands
the tests start, and a test's Ctrl-C would be lost. The suite starts from Python's default
instead, as a terminal gives it."""
import signal


def pytest_configure(config):
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

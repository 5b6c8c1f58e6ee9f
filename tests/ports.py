"""Free TCP ports of 127.0.0.1 for the servers a test or a benchmark starts.

One module for tests/e2e (conftest.py), tests/deploy (deployutil.py) and
bench/harness.py, which put tests/ on sys.path to import it: the three
start servers the same way and met the same race, so they share the one
fix. Plain Python, no pytest, so that bench/ can use it.

  free_port()   a port free now, none of the last 256 handed out

Threading: free_port() is for one thread (the tests and the harness choose
a server's ports before starting it, from the main thread).
"""
import collections
import socket

# The ports free_port() handed out last: the kernel may give a port just
# released again at once, and one server's ports (HTTP, metrics, gRPC) are
# chosen one after the other, so two of them could be the same (ptserve
# then refuses to start: "cannot listen to HTTP requests and metrics
# requests at the same address and port").
_recent_ports = collections.deque(maxlen=256)


def free_port():
    """A port of 127.0.0.1 free now, none of the last 256 handed out."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _recent_ports:
            _recent_ports.append(port)
            return port

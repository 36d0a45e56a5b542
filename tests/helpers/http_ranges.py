"""A local HTTP server for the tests of containers read over HTTP (data/byte_ranges.py HttpFile): it
answers Range requests as nginx or an object store does, and lists the requests it served, so a test can
count the round trips a reader makes."""
import contextlib
import functools
import http.server
import io
import os
import re
import sys
import threading


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves `Range: bytes=first-last` requests as nginx or an object store does (Python 3.9's handler
    always sends whole files: it stands for a server without Range support)."""

    def send_head(self):
        self.server.requests.append((self.path, self.headers.get('Range')))
        wanted = re.fullmatch(r'bytes=(\d+)-(\d+)', self.headers.get('Range', ''))
        if not wanted:
            return super().send_head()
        try:
            with open(self.translate_path(self.path), 'rb') as served:
                size = os.fstat(served.fileno()).st_size
                first, last = int(wanted.group(1)), min(int(wanted.group(2)), size - 1)
                served.seek(first)
                data = served.read(last + 1 - first)
        except OSError:
            self.send_error(404, 'File not found')
            return None
        self.send_response(206)
        self.send_header('Content-Range', 'bytes {}-{}/{}'.format(first, last, size))
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        return io.BytesIO(data)

    def log_message(self, *_):
        pass


class Server(http.server.ThreadingHTTPServer):
    """A client that hangs up mid-answer (the loader refusing a whole file sent for a Range request) is
    expected here: no traceback for it on the terminal, where a handler thread outliving its test prints.
    `requests`: [(path, Range header)] a RangeHandler served, in order."""

    def __init__(self, *args):
        super().__init__(*args)
        self.requests = []

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serving(folder, handler=RangeHandler, requests=None):
    """`folder` on a local HTTP server (a thread of this process) for the block: its base URL. The requests
    a RangeHandler serves are appended to the list `requests` when one is given."""
    server = Server(('127.0.0.1', 0), functools.partial(handler, directory=str(folder)))
    if requests is not None:
        server.requests = requests
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield 'http://127.0.0.1:{}'.format(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()

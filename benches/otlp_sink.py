#!/usr/bin/env python3
"""An OTLP/HTTP sink for benchmarks: answers 200 to every POST on 127.0.0.1:PORT (argv[1]),
counting requests and bytes, printed when stopped (SIGTERM)."""
import http.server, signal, sys, threading

count = [0, 0]
lock = threading.Lock()

class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        with lock:
            count[0] += 1
            count[1] += n
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass

srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink)
def stop(*_):
    print(f"{count[0]} requests, {count[1]} bytes", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
srv.serve_forever()

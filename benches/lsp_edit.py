"""`switchyard lsp`: the time from an edit to its diagnostics, as an editor sees it.

    python3 benches/lsp_edit.py target/release/switchyard graphs/screen_explorer.toml

Starts the server, opens the graph, then sends 100 full-text edits one at a time (each
appends a comment: the graph stays valid and is checked whole) and times each from
sending `didChange` to reading its `publishDiagnostics` back over the pipes.
"""

import json
import os
import subprocess
import sys
import time


def main():
    binary, graph = sys.argv[1], os.path.abspath(sys.argv[2])
    server = subprocess.Popen([binary, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def send(msg):
        body = json.dumps(msg).encode()
        server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        server.stdin.flush()

    def recv():
        length = 0
        while True:
            line = server.stdout.readline().strip()
            if not line:
                break
            if line.lower().startswith(b"content-length"):
                length = int(line.split(b":")[1])
        return json.loads(server.stdout.read(length))

    def diagnostics(uri):
        while True:
            msg = recv()
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                return msg["params"]["diagnostics"]

    uri = "file://" + graph
    text = open(graph).read()
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    recv()
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "toml", "version": 1, "text": text}}})
    assert diagnostics(uri) == [], "the graph must be valid"
    times = []
    for version in range(2, 102):
        edited = text + "\n# edit %d\n" % version
        start = time.perf_counter()
        send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": edited}]}})
        assert diagnostics(uri) == []
        times.append((time.perf_counter() - start) * 1000)
    send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    recv()
    send({"jsonrpc": "2.0", "method": "exit"})
    server.wait()
    times.sort()
    print("%s: edit -> diagnostics, %d edits: min %.2f ms, median %.2f ms, p90 %.2f ms, max %.2f ms" % (
        os.path.basename(graph), len(times), times[0], times[len(times) // 2],
        times[len(times) * 9 // 10], times[-1]))


main()

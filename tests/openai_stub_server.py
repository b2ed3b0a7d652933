"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 for offline tests of the real
HTTP client path (`openai/<model>` + base_url). Replies follow a script per agent role: the role
is read from the system prompt, the step from how many tool results the request already holds.
A step ``("sleep", seconds)`` answers that late (a provider that times out); ``("status", code)``
answers with that HTTP error (rate limit, server error)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubOpenAI:
    def __init__(self, scripts: dict[str, list]):
        self.scripts = scripts          # role name -> [ [(tool, args), ...] | "final text" ]
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                import time
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                step = stub.step(body)
                code = 200
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(step[1])
                    step = "late answer"
                if isinstance(step, tuple) and step[0] == "status":
                    code, step = step[1], "error"
                reply = json.dumps(stub.reply(body, step) if code == 200 else
                                   {"error": {"message": f"stub error {code}",
                                              "type": "server_error"}}).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def step(self, body: dict):
        messages = body["messages"]
        system = " ".join(str(m.get("content")) for m in messages if m["role"] == "system")
        role = next((r for r in self.scripts if r in system), None)
        script = self.scripts.get(role, ["done"])
        return script[min(sum(m["role"] == "tool" for m in messages), len(script) - 1)]

    def reply(self, body: dict, step) -> dict:
        message: dict = {"role": "assistant", "content": None}
        if isinstance(step, str):
            message["content"] = step
        else:
            message["tool_calls"] = [{"id": f"c{i}", "type": "function",
                                      "function": {"name": n, "arguments": json.dumps(a)}}
                                     for i, (n, a) in enumerate(step)]
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "stop" if isinstance(step, str) else "tool_calls"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()

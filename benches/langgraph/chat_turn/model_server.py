"""Scripted OpenAI-compatible chat server: streams the same reply (60 words in 15 SSE
deltas of 4 words, a finish chunk, a usage chunk, [DONE]) to every request, no pauses,
`connection: close` (as benches/chat_turn.rs). Usage: model_server.py PORT.
Prints its own CPU time (utime+stime) on SIGUSR1 / at exit to model_server.cpu."""
import asyncio, json, os, signal, sys, time


def reply_body() -> bytes:
    words = [f"word{i} " for i in range(60)]

    def chunk(delta, finish=None):
        return "data: " + json.dumps({"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1,
                                       "model": "scripted",
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    body = chunk({"role": "assistant", "content": ""})
    for k in range(0, 60, 4):
        body += chunk({"content": "".join(words[k:k + 4])})
    body += chunk({}, "stop")
    body += "data: " + json.dumps({"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1,
                                    "model": "scripted", "choices": [],
                                    "usage": {"prompt_tokens": 50, "completion_tokens": 60, "total_tokens": 110}}) + "\n\n"
    body += "data: [DONE]\n\n"
    return body.encode()


RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + reply_body())
REQUESTS = 0


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    global REQUESTS
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").lower().split("\r\n"):
            if line.startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        if length:
            await reader.readexactly(length)
        writer.write(RESPONSE)
        await writer.drain()
        REQUESTS += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int):
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=512)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print(f"model server on http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await stop.wait()
    t = os.times()
    print(f"model server: {REQUESTS} requests, cpu user {t.user:.2f}s sys {t.system:.2f}s", flush=True)


if __name__ == "__main__":
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(int(sys.argv[1])))

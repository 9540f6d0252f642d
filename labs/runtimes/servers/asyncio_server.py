"""Python asyncio as most asyncio servers start: asyncio.start_server(handler, port=PORT),
no host and no backlog argument. Usage: python3 asyncio_server.py PORT"""

import asyncio
import sys


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"ok\n")
    await writer.drain()
    writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, port=port)
    print("listening", [s.getsockname() for s in server.sockets], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))

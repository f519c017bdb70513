# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A one-shot HTTP server for client edge cases a real service cannot be made to
produce on demand: each connection gets the next answer, raw."""

import socket
import threading

DROP = None  # an answer that closes the connection without a word


def serve(answers):
    """(url, methods seen).  An answer is (body, content_length) or DROP; a body
    shorter than its Content-Length is cut short, as by a dropped connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen = []

    def run():
        for answer in answers:
            conn, _ = listener.accept()
            with conn:
                seen.append(conn.recv(65536).split(b" ", 1)[0])
                if answer is not DROP:
                    body, length = answer
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                                 % length + body)
        listener.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", seen
